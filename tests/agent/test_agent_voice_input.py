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


TURNS = (
    "How many legs does a spider have?",
    "Tell me a long story about a lighthouse keeper.",
    "How many legs does",
    "What is the capital of France?",
    "Say hello.",
)


def test_a_turn_is_heard_in_a_short_pass_with_the_words_of_the_full_window(whisper, engine: KokoroEngine, monkeypatch):
    """A turn is encoded over its own length, not Whisper's padded 30 s (`transcribe_short`),
    and heard with the same words as the windowed pass; silence and noise are heard as
    nothing; speech past `SHORT_CONTEXT_S` takes the windowed pass."""
    from voicestream.agent import speech_input
    from voicestream.audio import resample

    short_passes: list[str] = []  # the short passes' texts that were believed

    def short(whisper, samples):
        text = transcribe_short(whisper, samples)
        if text is not None:
            short_passes.append(text)
        return text

    transcribe_short = speech_input.transcribe_short
    monkeypatch.setattr(speech_input, "transcribe_short", short)
    for text in TURNS:
        speech = resample(synthesize(engine, text), engine.sample_rate, speech_input.WHISPER_RATE)
        turn = np.concatenate([np.zeros(3200, np.float32), speech, np.zeros(8000, np.float32)])
        windowed = speech_input.transcribe_samples(whisper, turn, skip_silence=True)
        heard = speech_input.transcribe_turn(whisper, turn)
        assert words(heard) == words(windowed), (heard, windowed)
    assert len(short_passes) == len(TURNS)
    noise = np.random.default_rng(1).standard_normal(32000).astype(np.float32) * 0.05
    assert speech_input.transcribe_turn(whisper, np.zeros(32000, np.float32)) == ""
    assert speech_input.transcribe_turn(whisper, noise) == ""
    assert len(short_passes) == len(TURNS)  # no speech: no pass at all

    monkeypatch.setattr(speech_input, "SHORT_CONTEXT_S", 1.0)
    speech = resample(synthesize(engine, TURNS[0]), engine.sample_rate, speech_input.WHISPER_RATE)
    assert {"spider", "legs"} <= set(words(speech_input.transcribe_turn(whisper, speech)))
    assert len(short_passes) == len(TURNS)


def test_a_short_pass_that_reads_the_turn_twice_is_not_believed():
    from voicestream.agent.speech_input import repeats

    assert repeats("What is the capital of France? What is the capital of France? What is")
    assert not repeats("How many legs does a spider have?")
    assert not repeats("I said no, no, no.")
