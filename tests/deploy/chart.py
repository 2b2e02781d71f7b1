"""Rendering the Helm chart (deploy/helm/voicestream) with the pinned helm binary.

No cluster is reachable here: `helm template` renders the manifests offline, and the tests
hold them to what the server, the images and the validators say.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "voicestream"
PROFILES = {path.name.removesuffix("-values.yaml"): path for path in sorted((CHART / "ci").glob("*-values.yaml"))}
"""The values profiles the tests render: defaults, gpu, hpa, keda."""
RELEASE = "vs"


def tool(name: str) -> str:
    """A command from this environment (the dev group), .tools/bin (deploy/install-tools.sh)
    or PATH."""
    for folder in (Path(sys.executable).parent, REPO / ".tools" / "bin"):
        if (folder / name).is_file():
            return str(folder / name)
    found = shutil.which(name)
    if found is None:
        absent(name, "uv sync (kubernetes-validate) or deploy/install-tools.sh (checkov)")
    return found


def helm() -> str:
    """The helm binary that deploy/install-tools.sh installs (.ci/run runs it), else PATH's."""
    installed = REPO / ".tools" / "helm" / "helm"
    found = str(installed) if installed.is_file() else shutil.which("helm")
    if found is None:
        absent("helm", "deploy/install-tools.sh")
    return found


def absent(command: str, installed_by: str) -> NoReturn:
    """A developer without the command skips; CI, whose .ci/run installs it, fails."""
    if os.environ.get("CI"):
        pytest.fail(f"{command} is missing on CI: {installed_by} (run by .ci/run) should have installed it")
    pytest.skip(f"{command} is not installed: {installed_by} installs it (.ci/run does)")


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm(), *args], capture_output=True, text=True, timeout=120, check=False)


def render_text(*values_files: Path, settings: dict[str, Any] | None = None) -> str:
    """`helm template` of the chart with these values files, then ``settings`` (JSON values)."""
    args = ["template", RELEASE, str(CHART), "--namespace", "voice"]
    for path in values_files:
        args += ["--values", str(path)]
    for key, value in (settings or {}).items():
        args += ["--set-json", f"{key}={json.dumps(value)}"]
    result = run_helm(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def render(*values_files: Path, settings: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(render_text(*values_files, settings=settings)) if doc]


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def named(docs: list[dict[str, Any]], kind: str, component: str) -> dict[str, Any]:
    (doc,) = [d for d in of_kind(docs, kind) if d["metadata"]["labels"].get("app.kubernetes.io/component") == component]
    return doc


def values() -> dict[str, Any]:
    return yaml.safe_load((CHART / "values.yaml").read_text())
