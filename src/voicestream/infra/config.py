"""What a deployment is made of: names, instance choice and scaling defaults. Pure, no CDK.

The CLIs validate their options into these objects before anything slow (jsii, the CDK CLI,
AWS) runs, and the stacks read nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

PROJECT = "voicestream"
SPEECH_MODELS = ("kokoro-82m",)
"""The models `speech-infra` deploys (one endpoint each)."""
VARIANT_NAME = "AllTraffic"
FOUNDATION_STACK = "VoicestreamSpeechFoundation"
AGENT_STACK = "VoicestreamAgent"
AGENT_RUNTIME_NAME = "voicestream_agent"
RUNTIME_NAME_PATTERN = re.compile(r"[a-zA-Z][a-zA-Z0-9_]{0,47}")
"""AgentCore's rule for a runtime name."""
CONTAINER_STARTUP_TIMEOUT_S = 600
"""Model load, warm-up and the first /ping on a cold instance, with room for a slow image pull."""

GPU_FAMILIES = ("g4dn", "g5", "g6", "g6e", "p3", "p4d", "p5")
"""SageMaker instance families with an NVIDIA GPU: these get the CUDA image."""
GPU_AMI_VERSION = "al2023-ami-sagemaker-inference-gpu-4-1"
"""NVIDIA driver 580 (CUDA 13.0): what the image's onnxruntime-gpu needs, without forward
compatibility. SageMaker's default GPU host runs driver 470 on g4dn/g5/p4d, which CUDA 13 cannot use."""

MEASURED_RTF_PER_CORE = 0.53
"""Kokoro-82M int8 on one CPU core: synthesis time / audio time (``bench rtf``, 2026-11-30, the
model's own ConvInteger). A CPU with VNNI (c7i, m7i) now renders about 1.5x faster
(docs/BENCHMARKS.md, "Convolutions as VNNI matrix products"), so the target this gives keeps
more headroom there; docs/DEPLOY.md says how to measure the instance's own figure."""
TARGET_UTILIZATION = 0.5
"""Scale out at half of what an instance can render in real time: room for bursts while the
new instance starts (several minutes), and speech that starts without queueing."""
GPU_TARGET_SESSIONS = 8
"""Not measured here (no GPU on the development machine): re-measure on the instance and pass
--target-sessions (docs/DEPLOY.md, "Scaling")."""


class ConfigError(ValueError):
    """An option the deployment cannot use; the message says which and why."""


def endpoint_name(model: str) -> str:
    return f"{PROJECT}-{model}"


def endpoint_stack_name(model: str) -> str:
    return "VoicestreamSpeech" + "".join(part.capitalize() for part in re.split(r"[^a-zA-Z0-9]+", model))


def instance_family(instance_type: str) -> str:
    match = re.fullmatch(r"ml\.([a-z0-9-]+)\.([a-z0-9]+)", instance_type)
    if not match:
        raise ConfigError(f"instance type {instance_type!r} is not a SageMaker type like ml.g5.xlarge")
    return match.group(1)


def image_flavor(instance_type: str) -> str:
    """`cuda` for a GPU instance family, `cpu` otherwise: the speech image's FLAVOR."""
    return "cuda" if instance_family(instance_type) in GPU_FAMILIES else "cpu"


def default_target_sessions(instance_type: str) -> int:
    """Concurrent requests per instance at which to scale out.

    On a CPU instance: each vCPU renders 1 / RTF streams in real time, at TARGET_UTILIZATION.
    A GPU renders many times faster than a core; its figure is a conservative guess.
    """
    if image_flavor(instance_type) == "cuda":
        return GPU_TARGET_SESSIONS
    return max(1, int(vcpus(instance_type) / MEASURED_RTF_PER_CORE * TARGET_UTILIZATION))


def vcpus(instance_type: str) -> int:
    """vCPUs of a current-generation size: large 2, xlarge 4, Nxlarge 4N (medium 1)."""
    size = instance_type.rsplit(".", 1)[1]
    if size in {"medium", "large"}:
        return {"medium": 1, "large": 2}[size]
    match = re.fullmatch(r"(\d*)xlarge", size)
    if not match:
        raise ConfigError(f"cannot tell the vCPUs of {instance_type}: pass --target-sessions")
    return 4 * int(match.group(1) or 1)


@dataclass(frozen=True)
class SpeechDeployment:
    """One speech model's SageMaker endpoint and its scaling."""

    model: str = "kokoro-82m"
    instance_type: str = "ml.g5.xlarge"
    min_instances: int = 1
    max_instances: int = 4
    target_sessions: int | None = None
    image_uri: str | None = None
    weights_dir: Path | None = None
    """A weights variant (model.onnx + voices/) to upload and mount at /opt/ml/model;
    None: the weights baked into the image."""
    weights_variant: str | None = None

    def __post_init__(self) -> None:
        if self.model not in SPEECH_MODELS:
            raise ConfigError(f"unknown model {self.model!r}; choose one of: {', '.join(SPEECH_MODELS)}")
        image_flavor(self.instance_type)
        if not 1 <= self.min_instances <= self.max_instances:
            raise ConfigError(
                f"need 1 <= --min-instances <= --max-instances, got {self.min_instances} and {self.max_instances}"
            )
        if self.target_sessions is None:
            default_target_sessions(self.instance_type)
        elif self.target_sessions < 1:
            raise ConfigError("--target-sessions must be at least 1")
        if self.image_uri is not None:
            repository_name(self.image_uri)
        if (self.weights_dir is None) != (self.weights_variant is None):
            raise ConfigError("a weights variant needs its directory, and the other way round")

    @property
    def endpoint_name(self) -> str:
        return endpoint_name(self.model)

    @property
    def flavor(self) -> str:
        return image_flavor(self.instance_type)

    @property
    def scale_out_target(self) -> int:
        return self.target_sessions or default_target_sessions(self.instance_type)


@dataclass(frozen=True)
class AgentDeployment:
    """The AgentCore runtime: its model, the speech endpoint it talks to, its image."""

    bedrock_model_id: str
    speech_endpoint: str = endpoint_name(SPEECH_MODELS[0])
    image_uri: str | None = None
    runtime_name: str = AGENT_RUNTIME_NAME

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-zA-Z0-9._:/-]{1,200}", self.bedrock_model_id):
            raise ConfigError(f"{self.bedrock_model_id!r} is not a Bedrock model or inference profile id")
        if not re.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", self.speech_endpoint):
            raise ConfigError(f"{self.speech_endpoint!r} is not a SageMaker endpoint name")
        if self.image_uri is not None:
            repository_name(self.image_uri)
        if not RUNTIME_NAME_PATTERN.fullmatch(self.runtime_name):
            raise ConfigError(f"runtime name {self.runtime_name!r} must match {RUNTIME_NAME_PATTERN.pattern}")


def runtime_environment(deployment: AgentDeployment, region: str) -> dict[str, str]:
    """What the AgentCore runtime's container is started with (AgentSettings.from_env reads it)."""
    return {
        "VOICESTREAM_SPEECH_URL": f"sagemaker://{deployment.speech_endpoint}?region={region}",
        "VOICESTREAM_LLM": "bedrock",
        "VOICESTREAM_LLM_MODEL": deployment.bedrock_model_id,
        "AWS_REGION": region,
    }


def repository_name(image_uri: str) -> str:
    """The ECR repository of an image URI (ACCOUNT.dkr.ecr.REGION.<domain>/REPO[:tag|@digest])."""
    match = re.fullmatch(r"\d{12}\.dkr\.ecr\.[a-z0-9-]+\.[a-z0-9.]+/([a-z0-9._/-]+)(?:[:@].+)?", image_uri)
    if not match:
        raise ConfigError(f"--image-uri {image_uri!r} is not an ECR image URI (ACCOUNT.dkr.ecr.REGION.<domain>/REPO:TAG)")
    return match.group(1)
