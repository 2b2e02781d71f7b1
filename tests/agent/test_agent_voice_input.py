"""Voice input over real HTTP: a spoken question (Kokoro's voice, encoded as a browser
records it) is transcribed by the agent's Whisper and answered; recordings that cannot be
answered get the error codes of PROTOCOL.md."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from tests.agent.agent_checks import check_answer
from tests.agent.test_agent_app import post_events
from tests.asr import words

from voicestream.agent.speech_input import SpeechRecognizer
from voicestream.audio import create_encoder
from voicestream.engine import KokoroEngine
from voicestream.engine.offline import synthesize
from voicestream.protocol import (
    MAX_SPOKEN_AUDIO_BYTES,
    ErrorCode,
    ProtocolError,
    parse_agent_request,
)

QUESTION = "What is the capital of France?"


def recording(samples: np.ndarray, format: str, rate: int = 24000) -> str:
    """`samples` encoded as `format` (opus: Ogg Opus, as Firefox records), in base64."""
    encoder = create_encoder(format, rate)
    data = encoder.encode(samples) + encoder.finish()
    return base64.b64encode(data).decode("ascii")


async def test_spoken_question_is_transcribed_then_answered(agent_url, engine: KokoroEngine):
    audio = recording(synthesize(engine, QUESTION), "opus")

    events = await post_events(agent_url, {"audio": audio, "audio_format": "ogg", "mode": "bidi"})

    transcript, answer = events[0], events[1:]
    assert transcript["type"] == "transcript"
    assert {"capital", "france"} <= set(words(transcript["text"])), transcript
    assert transcript["request_id"] == answer[0]["request_id"]
    check_answer(answer, "bidi")


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({"audio": base64.b64encode(b"not a recording").decode(), "audio_format": "webm"}, "invalid_audio"),
        ({"audio": "@@not base64@@", "audio_format": "wav"}, "invalid_audio"),
        ({"audio": "AAAA", "audio_format": "mp4"}, "invalid_message"),
        ({"audio": "AAAA", "audio_format": "wav", "prompt": "Hello."}, "invalid_message"),
        ({"audio": "A" * (MAX_SPOKEN_AUDIO_BYTES // 3 * 4 + 8), "audio_format": "wav"}, "audio_too_large"),
    ],
)
async def test_unusable_recording_is_an_error_event(agent_url, payload, code):
    events = await post_events(agent_url, payload, 30)

    assert [event["type"] for event in events] == ["error", "agent_end"]
    assert events[0]["code"] == code and events[0]["message"]


async def test_silence_is_no_speech(agent_url):
    silence = recording(np.zeros(24000 * 2, dtype=np.float32), "wav")

    events = await post_events(agent_url, {"audio": silence, "audio_format": "wav"}, 60)

    assert [event["type"] for event in events] == ["error", "agent_end"]
    assert events[0]["code"] == "no_speech"


def test_a_missing_model_is_asr_unavailable(tmp_path):
    request = parse_agent_request({"audio": recording(np.ones(2400, np.float32) * 0.1, "wav"), "audio_format": "wav"})

    with pytest.raises(ProtocolError) as caught:
        SpeechRecognizer(str(tmp_path / "no-such-model")).transcribe(request)

    assert caught.value.code == ErrorCode.ASR_UNAVAILABLE
    assert "--asr-model" in caught.value.message
