"""The Helm chart, proven offline: lint, render, validate, and hold the manifests to what the
server, the images and the SageMaker stack say.

Every values profile in deploy/helm/voicestream/ci/ is linted (--strict) and rendered, and
the output is validated with kubernetes-validate --strict against the oldest and the newest
Kubernetes the chart's kubeVersion admits; the KEDA ScaledObject against KEDA's own CRD
schema (vendored, strict as `kubectl --validate=strict`), and every profile by checkov.
"""

from __future__ import annotations

import base64
import json
import math
import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from tests.deploy.chart import (
    CHART,
    PROFILES,
    REPO,
    named,
    of_kind,
    render,
    render_text,
    run_helm,
    tool,
    values,
)
from tests.test_dockerfiles import AGENT_DOCKERFILE, COMPOSE, SPEECH_DOCKERFILE, parse_dockerfile

from voicestream.agent.app import DEFAULT_GRACE_S
from voicestream.edge.drain import CLOSE_S, SHUTDOWN_S, exit_deadline_s
from voicestream.infra.config import CONTAINER_STARTUP_TIMEOUT_S, image_flavor
from voicestream.server import ServerSettings
from voicestream.server.runner import _config
from voicestream.speech.metrics import ServerMetrics

KEDA_SCHEMA = Path(__file__).parent / "keda_scaledobject_v2.20.2.json"
DEPLOY_DOC = REPO / "docs" / "DEPLOY.md"
CRD_KINDS = {"ScaledObject", "HTTPRoute"}
"""Custom resources: Kubernetes' own schemas do not know them (KEDA's is checked below; the
Gateway API's HTTPRoute is rendered but not schema-checked here)."""

CHECKOV_SKIPS = {
    "CKV_K8S_14": "the agent image is `latest` as docker/compose.yaml builds it; pin agent.image.tag in values",
    "CKV_K8S_43": "images by digest: the registry and digest are the operator's, not the chart's",
    "CKV_K8S_15": "pullPolicy Always would re-pull a multi-GB CUDA image on every pod start",
    "CKV_K8S_21": "the namespace comes from `helm install --namespace`, not from the templates",
    "CKV_K8S_35": "the servers read the API key from VOICESTREAM_API_KEY only (no key file option)",
    "CKV2_K8S_6": "a NetworkPolicy is optional (networkPolicy.enabled; the gpu profile renders one)",
}
"""Reviewed: each finding checkov reports on the rendered profiles, and why it stays."""


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return {name: render(path) for name, path in PROFILES.items()}


def kube_versions() -> tuple[str, str]:
    """The oldest and the newest minor that Chart.yaml's kubeVersion (">=A <B") admits."""
    declared = yaml.safe_load((CHART / "Chart.yaml").read_text())["kubeVersion"]
    match = re.fullmatch(r">=1\.(\d+)\.0-0 <1\.(\d+)\.0-0", declared)
    assert match, f"kubeVersion {declared!r} is not a >=1.A.0-0 <1.B.0-0 range"
    return f"1.{match.group(1)}.0", f"1.{int(match.group(2)) - 1}.0"


def pod_specs(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    specs = [d["spec"]["template"]["spec"] for d in of_kind(docs, "Deployment")]
    return specs + [d["spec"] for d in of_kind(docs, "Pod")]


def speech_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = named(docs, "Deployment", "speech")["spec"]["template"]["spec"]["containers"]
    return container


def option(container: dict[str, Any], flag: str) -> str:
    args = container["args"]
    return args[args.index(flag) + 1]


# --- helm lint, kubernetes-validate, KEDA's schema, checkov -----------------------------


def test_profiles_are_the_four_the_docs_name() -> None:
    """docs/DEPLOY.md names the profiles these tests render ("`helm template` of each profile
    (defaults, gpu, ...)") and, as starting points, their values files: the chart's ci/
    folder holds those four and no other, and every values file the docs name is one of them."""
    text = " ".join(DEPLOY_DOC.read_text().split())
    rendered = re.search(r"`helm template` of each profile \(([^)]*)\)", text)
    assert rendered, "docs/DEPLOY.md no longer says which profiles tests/deploy/ renders"
    documented = [name.strip() for name in rendered.group(1).split(",")]
    assert len(documented) == len(set(documented)) == 4, documented
    assert set(PROFILES) == set(documented), (sorted(PROFILES), documented)
    starting_points = set(re.findall(r"`(\w+)-values\.yaml`", text))
    assert starting_points and starting_points <= set(PROFILES), starting_points


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_lint_strict(profile: str) -> None:
    result = run_helm("lint", "--strict", str(CHART), "--values", str(PROFILES[profile]))
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_refuses_values_the_chart_cannot_use() -> None:
    for bad in ("autoscaling.mode=both", "drain.graceSeconds=-1", "speech.replica=3", "gpu.count=0"):
        result = run_helm("template", "vs", str(CHART), "--set", bad)
        assert result.returncode != 0 and "values don't meet the specifications" in result.stderr, bad


@pytest.mark.parametrize("version", kube_versions())
def test_kubernetes_validate_strict(rendered: dict[str, list[dict[str, Any]]], version: str, tmp_path: Path) -> None:
    validator = tool("kubernetes-validate")
    files = []
    for name, docs in rendered.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump_all([d for d in docs if d["kind"] not in CRD_KINDS]))
        files.append(str(path))
    result = subprocess.run(
        [validator, "--strict", "--kubernetes-version", version, *files],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0 and "ERROR" not in result.stdout, result.stdout + result.stderr
    kinds = {d["kind"] for docs in rendered.values() for d in docs} - CRD_KINDS
    assert result.stdout.count("passed") == sum(len(docs) for docs in rendered.values()) - sum(
        d["kind"] in CRD_KINDS for docs in rendered.values() for d in docs
    ), result.stdout
    assert {"Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler", "NetworkPolicy",
            "Ingress", "Secret", "Pod"} <= kinds


def test_kube_version_admits_the_validated_range_only() -> None:
    oldest, newest = kube_versions()
    for version in (oldest, newest):
        assert run_helm("template", "vs", str(CHART), "--kube-version", version).returncode == 0, version
    for version in ("1.28.0", "1.38.0"):
        refused = run_helm("template", "vs", str(CHART), "--kube-version", version)
        assert refused.returncode != 0 and "kubeVersion" in refused.stderr, version


def strict(schema: Any) -> Any:
    """Unknown fields refused, as `kubectl --validate=strict` refuses them against a CRD:
    every object schema with properties and no say about others gets additionalProperties false."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def keda_validator() -> jsonschema.Draft7Validator:
    schema = strict(json.loads(KEDA_SCHEMA.read_text())["openAPIV3Schema"])
    # ObjectMeta is open in a CRD schema (the API server checks it): check the names only.
    schema["properties"]["metadata"] = {"type": "object", "required": ["name"]}
    return jsonschema.Draft7Validator(schema)


def test_keda_scaled_object_against_kedas_crd_schema(rendered: dict[str, list[dict[str, Any]]]) -> None:
    (scaled,) = of_kind(rendered["keda"], "ScaledObject")
    validator = keda_validator()
    assert not list(validator.iter_errors(scaled)), [e.message for e in validator.iter_errors(scaled)]
    typo = json.loads(json.dumps(scaled))
    typo["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behaviour"] = typo["spec"]["advanced"][
        "horizontalPodAutoscalerConfig"].pop("behavior")
    assert list(validator.iter_errors(typo)), "the strict schema let a misspelt field through"


def test_checkov_with_the_reviewed_skips(rendered: dict[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    checkov = tool("checkov")
    for name, docs in rendered.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump_all(docs))
    result = subprocess.run(
        [checkov, "--directory", str(tmp_path), "--framework", "kubernetes", "--output", "json", "--quiet",
         "--skip-check", ",".join(CHECKOV_SKIPS)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    report = json.loads(result.stdout)
    reports = report if isinstance(report, list) else [report]
    failed = [f"{c['check_id']} {c['resource']}" for r in reports for c in r["results"]["failed_checks"]]
    assert not failed, failed
    assert sum(r["summary"]["passed"] for r in reports) > 100


# --- drain: the grace arithmetic and the probes -------------------------------------------


def test_termination_grace_covers_prestop_and_the_servers_own_exit_deadline() -> None:
    """Each pod's grace is its preStop sleep plus its server's deadline from SIGTERM to exit
    (`voicestream.edge.drain`: the grace, the close, the shutdown), so that the kubelet never kills
    a server that is still closing what it cut."""
    drain = values()["drain"]
    assert drain["sessionCloseSeconds"] == CLOSE_S
    assert drain["shutdownSeconds"] == SHUTDOWN_S
    assert _config(ServerSettings(), None, "warning").timeout_graceful_shutdown < SHUTDOWN_S
    assert drain["graceSeconds"] == ServerSettings().grace_s
    assert values()["agent"]["graceSeconds"] == DEFAULT_GRACE_S
    settings = {"drain.preStopSeconds": 7, "drain.graceSeconds": 42.5, "agent.enabled": True}
    docs = render(settings=settings)
    speech = named(docs, "Deployment", "speech")["spec"]["template"]["spec"]
    assert speech["terminationGracePeriodSeconds"] == math.ceil(7 + exit_deadline_s(42.5))
    (container,) = speech["containers"]
    assert option(container, "--grace-s") == "42.5"
    assert container["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "7"]
    agent = named(docs, "Deployment", "agent")["spec"]["template"]["spec"]
    assert agent["terminationGracePeriodSeconds"] == math.ceil(7 + exit_deadline_s(DEFAULT_GRACE_S))


def test_probes_ping_for_startup_and_readiness_tcp_for_liveness(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for docs in rendered.values():
        for deployment in of_kind(docs, "Deployment"):
            for container in deployment["spec"]["template"]["spec"]["containers"]:
                assert container["startupProbe"]["httpGet"]["path"] == "/ping"
                assert container["readinessProbe"]["httpGet"]["path"] == "/ping"
                liveness = container["livenessProbe"]
                assert "httpGet" not in liveness and "exec" not in liveness, "a draining pod would be killed"
                assert liveness["tcpSocket"]["port"] == container["ports"][0]["name"]
    startup = speech_container(rendered["defaults"])["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= CONTAINER_STARTUP_TIMEOUT_S


def test_rollouts_surge_before_draining_and_disruptions_one_at_a_time(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for docs in rendered.values():
        for deployment in of_kind(docs, "Deployment"):
            assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
        (pdb,) = of_kind(docs, "PodDisruptionBudget")
        pod_labels = named(docs, "Deployment", "speech")["spec"]["template"]["metadata"]["labels"]
        assert pdb["spec"]["maxUnavailable"] == 1
        assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


# --- autoscaling -----------------------------------------------------------------------


def test_exactly_one_autoscaler_per_mode(rendered: dict[str, list[dict[str, Any]]]) -> None:
    counts = {
        name: (len(of_kind(docs, "ScaledObject")), len(of_kind(docs, "HorizontalPodAutoscaler")))
        for name, docs in rendered.items()
    }
    assert counts == {"defaults": (0, 0), "gpu": (0, 0), "keda": (1, 0), "hpa": (0, 1)}
    for name in ("keda", "hpa"):
        assert "replicas" not in named(rendered[name], "Deployment", "speech")["spec"], "the autoscaler owns it"
    assert named(rendered["defaults"], "Deployment", "speech")["spec"]["replicas"] == 2


def test_autoscalers_watch_the_sessions_gauge_the_server_exports(rendered: dict[str, list[dict[str, Any]]]) -> None:
    exported = ServerMetrics().active_sessions._name
    assert exported == "voicestream_active_sessions"
    (hpa,) = of_kind(rendered["hpa"], "HorizontalPodAutoscaler")
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "Pods" and metric["pods"]["metric"]["name"] == exported
    assert metric["pods"]["target"] == {"type": "AverageValue", "averageValue": "2"}
    (scaled,) = of_kind(rendered["keda"], "ScaledObject")
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metadata"]["threshold"] == "2"
    assert trigger["metadata"]["query"] == f'sum({exported}{{namespace="voice",pod=~"vs-voicestream-speech-.*"}})'
    assert scaled["spec"]["scaleTargetRef"]["name"] == hpa["spec"]["scaleTargetRef"]["name"] == "vs-voicestream-speech"


def test_scale_down_is_slow_and_one_pod_at_a_time(rendered: dict[str, list[dict[str, Any]]]) -> None:
    (hpa,) = of_kind(rendered["hpa"], "HorizontalPodAutoscaler")
    (scaled,) = of_kind(rendered["keda"], "ScaledObject")
    for behavior in (hpa["spec"]["behavior"], scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]):
        down = behavior["scaleDown"]
        assert down["stabilizationWindowSeconds"] >= 600
        assert down["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 600}]


def test_an_unknown_autoscaling_mode_renders_nothing() -> None:
    result = run_helm("template", "vs", str(CHART), "--set", "autoscaling.enabled=true",
                      "--set", "autoscaling.mode=both")
    assert result.returncode != 0


# --- the same image, port and user as docker/ and the SageMaker stack ------------------------


def test_image_port_and_user_match_the_dockerfiles_and_sagemaker(rendered: dict[str, list[dict[str, Any]]]) -> None:
    speech = parse_dockerfile(SPEECH_DOCKERFILE.read_text())
    compose = yaml.safe_load(COMPOSE.read_text())["services"]
    assert compose["speech"]["image"] == "voicestream-speech:${SPEECH_FLAVOR:-cpu}"
    exposed = " ".join(i.args for i in speech.final.all("EXPOSE")).split()
    assert "${SAGEMAKER_BIND_TO_PORT:-8080}" in "".join(speech.final.all("COPY")[-1].heredocs.values())
    for name, instance_type in (("defaults", "ml.c7i.xlarge"), ("gpu", "ml.g5.xlarge")):
        container = speech_container(rendered[name])
        flavor = image_flavor(instance_type)
        assert container["image"] == f"voicestream-speech:{flavor}"
        assert option(container, "--device") == speech.env(speech.stage(f"base-{flavor}"))["VOICESTREAM_DEVICE"]
        assert [str(p["containerPort"]) for p in container["ports"]] == exposed == ["8080"]
        assert container["args"][0] == speech.final.last("CMD").exec_form[0] == "serve"
    uid = speech.final.last("USER").args.split(":")[0]
    agent_user = parse_dockerfile(AGENT_DOCKERFILE.read_text()).final
    assert f"--uid {uid}" in " ".join(i.args for i in agent_user.all("RUN"))
    for spec in pod_specs(rendered["gpu"]):
        assert spec["securityContext"]["runAsUser"] == int(uid)
    agent = named(rendered["gpu"], "Deployment", "agent")["spec"]["template"]["spec"]
    assert agent["containers"][0]["image"].startswith(compose["agent"]["image"] + ":")
    platform = parse_dockerfile(AGENT_DOCKERFILE.read_text()).final.platform
    assert agent["nodeSelector"] == {"kubernetes.io/arch": platform.removeprefix("linux/")}


# --- GPU -----------------------------------------------------------------------------------


def test_gpu_profile_asks_for_a_gpu_node_and_runs_fp16_on_cuda(rendered: dict[str, list[dict[str, Any]]]) -> None:
    spec = named(rendered["gpu"], "Deployment", "speech")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert (option(container, "--device"), option(container, "--variant")) == ("cuda", "fp16")
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["VOICESTREAM_OFFLINE"] == "0", "fp16 is not baked in: without a model volume it comes from the Hub"
    cpu = speech_container(rendered["defaults"])
    assert (option(cpu, "--device"), option(cpu, "--variant")) == ("cpu", "int8")
    assert "nvidia.com/gpu" not in cpu["resources"]["limits"]
    assert {e["name"]: e.get("value") for e in cpu["env"]}["VOICESTREAM_OFFLINE"] == "1"


def test_a_model_volume_keeps_the_server_offline() -> None:
    docs = render(PROFILES["gpu"], settings={"model.volume.persistentVolumeClaim.claimName": "kokoro-fp16"})
    spec = named(docs, "Deployment", "speech")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert {"name": "model", "mountPath": "/opt/ml/model", "readOnly": True} in container["volumeMounts"]
    assert {"name": "model", "persistentVolumeClaim": {"claimName": "kokoro-fp16"}} in spec["volumes"]
    assert {e["name"]: e.get("value") for e in container["env"]}["VOICESTREAM_OFFLINE"] == "1"


# --- security ----------------------------------------------------------------------------


def test_every_pod_is_locked_down(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for docs in rendered.values():
        for spec in pod_specs(docs):
            assert spec["automountServiceAccountToken"] is False
            assert spec["securityContext"]["runAsNonRoot"] is True
            assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
            for container in spec["containers"]:
                context = container["securityContext"]
                assert context["readOnlyRootFilesystem"] is True
                assert context["allowPrivilegeEscalation"] is False
                assert context["capabilities"] == {"drop": ["ALL"]}
                mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
                assert "/tmp" in mounts or container["name"] == "speak"
    container = speech_container(rendered["defaults"])
    cache_home = {e["name"]: e.get("value") for e in container["env"]}["XDG_CACHE_HOME"]
    assert cache_home == next(m for m in container["volumeMounts"] if m["name"] == "cache")["mountPath"]
    volumes = named(rendered["defaults"], "Deployment", "speech")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "cache", "emptyDir": {"sizeLimit": "2Gi"}} in volumes


def test_api_key_comes_from_a_secret(rendered: dict[str, list[dict[str, Any]]]) -> None:
    (secret,) = of_kind(rendered["keda"], "Secret")
    assert base64.b64decode(secret["data"]["api-key"]).decode() == "change-me-in-a-real-secret"
    env = {e["name"]: e for e in speech_container(rendered["keda"])["env"]}
    assert env["VOICESTREAM_API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": secret["metadata"]["name"], "key": "api-key"}
    assert not of_kind(rendered["gpu"], "Secret"), "an existing Secret is used, not created"
    agent = named(rendered["gpu"], "Deployment", "agent")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in agent["env"]}
    assert env["VOICESTREAM_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "voicestream-api-key"
    assert env["VOICESTREAM_SPEECH_API_KEY"]["valueFrom"] == env["VOICESTREAM_API_KEY"]["valueFrom"]
    assert env["VOICESTREAM_SPEECH_URL"]["value"] == "ws://vs-voicestream-speech:8080/invocations-bidirectional-stream"
    assert "VOICESTREAM_API_KEY" not in {e["name"] for e in speech_container(rendered["defaults"])["env"]}


def test_network_policy_lets_in_the_agent_the_test_pod_and_listed_peers(rendered: dict[str, list[dict[str, Any]]]) -> None:
    (policy,) = of_kind(rendered["gpu"], "NetworkPolicy")
    speech_labels = named(rendered["gpu"], "Deployment", "speech")["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= speech_labels.items()
    (rule,) = policy["spec"]["ingress"]
    peers = rule["from"]
    agent_labels = named(rendered["gpu"], "Deployment", "agent")["spec"]["template"]["metadata"]["labels"]
    (test_pod,) = of_kind(rendered["gpu"], "Pod")
    selectors = [p["podSelector"]["matchLabels"] for p in peers if "podSelector" in p]
    assert any(s.items() <= agent_labels.items() for s in selectors)
    assert any(s.items() <= test_pod["metadata"]["labels"].items() for s in selectors)
    assert not any(s.items() <= speech_labels.items() for s in selectors)
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}} in peers
    assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]


# --- exposure and helm test -----------------------------------------------------------------


def test_ingress_and_httproute_send_to_the_chosen_service(rendered: dict[str, list[dict[str, Any]]]) -> None:
    (ingress,) = of_kind(rendered["gpu"], "Ingress")
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "vs-voicestream-agent", "port": {"number": 8080}}
    assert int(ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-read-timeout"]) > (
        ServerSettings().idle_timeout_s
    )
    (route,) = of_kind(rendered["hpa"], "HTTPRoute")
    assert route["spec"]["rules"][0]["backendRefs"] == [{"name": "vs-voicestream-speech", "port": 8080}]


def test_helm_test_pod_pings_then_speaks(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for docs in rendered.values():
        (pod,) = of_kind(docs, "Pod")
        assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
        (container,) = pod["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["SPEECH_URL"] == "http://vs-voicestream-speech:8080"
        script = container["command"][-1]
        assert script.index('"/ping"') < script.index('"/invocations"')
        assert container["image"] == speech_container(docs)["image"]


def test_rendered_text_has_no_empty_lines_inside_lists() -> None:
    """An empty include leaves a blank line; harmless to YAML, but a sign of a broken template."""
    text = render_text(PROFILES["gpu"])
    assert "\n            \n" not in text and "\n        \n" not in text
