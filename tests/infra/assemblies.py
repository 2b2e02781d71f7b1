"""Synths shared by the infra tests: the default speech app and the default agent app are
synthesized once per run, whichever worker asks first, into the run's own temporary folder,
and read by every test file that needs them (test_speech_stacks, test_agent_stack and the
pinned CDK CLI's test in test_cli). A synth starts jsii's Node.js runtime and takes seconds."""

from __future__ import annotations

import fcntl
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from voicestream.infra.config import AgentDeployment, SpeechDeployment

AGENT_PROFILE = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
"""The default agent deployment's model: a cross-region inference profile."""
LOCK_TIMEOUT_S = 300


def shared_assembly(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str, synth: Callable[[str], object]
) -> Path:
    """The cloud assembly ``synth`` writes into a folder, made by the first worker that asks
    (the others wait for it) and kept for the rest of the run."""
    root = tmp_path_factory.getbasetemp()
    root = root if worker_id == "master" else root.parent  # the run's folder, above each worker's
    target = root / f"assembly-{name}"
    with (root / f"assembly-{name}.lock").open("w") as lock:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, f"another worker held {lock.name} for {LOCK_TIMEOUT_S} s"
                time.sleep(0.1)
        if not (target / "manifest.json").is_file():
            partial = root / f"assembly-{name}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            synth(str(partial))
            partial.rename(target)
    return target


@pytest.fixture(scope="session")
def speech_assembly(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The speech app's defaults: ml.g5.xlarge, 1 to 4 instances, the CUDA image, baked-in weights."""
    from voicestream.infra.speech_stacks import speech_app

    return shared_assembly(tmp_path_factory, worker_id, "speech", lambda out: speech_app(SpeechDeployment(), out).synth())


@pytest.fixture(scope="session")
def agent_assembly(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The agent app's defaults: the image built from docker/agent.Dockerfile, `AGENT_PROFILE`."""
    from voicestream.infra.agent_stack import agent_app

    deployment = AgentDeployment(AGENT_PROFILE)
    return shared_assembly(tmp_path_factory, worker_id, "agent", lambda out: agent_app(deployment, out).synth())
