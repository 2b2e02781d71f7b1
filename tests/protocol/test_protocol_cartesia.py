"""Cartesia's messages in the protocol layer: table tests of the pure parser (no server)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from voicestream.protocol import ErrorCode, ProtocolError
from voicestream.protocol.cartesia import (
    BYTES_CONTAINERS,
    CartesiaDone,
    CartesiaError,
    parse_generation,
)


def _message(**fields: Any) -> dict[str, Any]:
    return {"context_id": "c1", "transcript": "Hello.", **fields}


def test_a_pipecat_message_parses_with_cartesias_defaults() -> None:
    request = parse_generation({
        "transcript": "Hi there. ", "continue": True, "context_id": "ctx", "model_id": "sonic-2",
        "voice": {"mode": "id", "id": "am_adam"}, "language": "en", "add_timestamps": True,
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 16000},
    })
    assert (request.context_id, request.transcript, request.continue_) == ("ctx", "Hi there. ", True)
    assert (request.voice_id, request.speed, request.language_override) == ("am_adam", 1.0, None)
    assert request.output_format.sample_rate == 16000
    assert request.add_timestamps and not request.flush
    assert request.max_buffer_delay_ms == 3000


def test_nulls_count_as_absent_and_a_bad_context_id_is_none() -> None:
    request = parse_generation({"context_id": 7, "transcript": None, "voice": {"id": None}, "flush": None})
    assert (request.context_id, request.transcript, request.voice_id, request.flush) == (None, "", "af_heart", False)


def test_a_bare_voice_id_is_the_id_form() -> None:
    """What the official SDK sends (``voice="af_heart"``)."""
    assert parse_generation(_message(voice="bf_emma")).voice_id == "bf_emma"


def test_a_language_other_than_the_voices_is_kept() -> None:
    assert parse_generation(_message(voice={"id": "bf_emma"}, language="en")).language_override is None
    assert parse_generation(_message(voice={"id": "af_heart"}, language="fr")).language_override == "fr"


@pytest.mark.parametrize(
    ("fields", "code", "words"),
    [
        ({"voice": {"mode": "embedding", "embedding": [0.1]}}, ErrorCode.UNKNOWN_VOICE, "mode"),
        ({"voice": {"id": 3}}, ErrorCode.UNKNOWN_VOICE, "voice"),
        ({"voice": 7}, ErrorCode.INVALID_MESSAGE, "voice must be an object"),
        ({"generation_config": {"speed": "fast"}}, ErrorCode.INVALID_SPEED, "speed"),
        ({"generation_config": {"speed": True}}, ErrorCode.INVALID_SPEED, "speed"),
        ({"output_format": {"encoding": "pcm_alaw"}}, ErrorCode.UNSUPPORTED_FORMAT, "pcm_s16le, pcm_mulaw, pcm_f32le"),
        ({"output_format": {"sample_rate": 12345}}, ErrorCode.UNSUPPORTED_SAMPLE_RATE, "24000"),
        ({"output_format": {"container": "mp3"}}, ErrorCode.UNSUPPORTED_FORMAT, "must be raw"),
        ({"output_format": {"container": "mp3", "bit_rate": 0}}, ErrorCode.UNSUPPORTED_FORMAT, "bit_rate"),
        ({"max_buffer_delay_ms": -1}, ErrorCode.INVALID_MESSAGE, "0 to 5000"),
        ({"max_buffer_delay_ms": True}, ErrorCode.INVALID_MESSAGE, "0 to 5000"),
        ({"transcript": 7}, ErrorCode.INVALID_MESSAGE, "transcript must be a str"),
        ({"continue": "yes"}, ErrorCode.INVALID_MESSAGE, "continue must be a bool"),
        ({"flush": 1}, ErrorCode.INVALID_MESSAGE, "flush must be a bool"),
    ],
)
def test_each_bad_field_has_its_code_and_is_addressed_to_the_context(
    fields: dict[str, Any], code: ErrorCode, words: str,
) -> None:
    with pytest.raises(ProtocolError) as raised:
        parse_generation(_message(**fields))
    assert raised.value.code == code
    assert words in raised.value.message
    assert raised.value.request_id == "c1"


def test_bytes_takes_wav_and_mp3_and_wav_is_pcm16_only() -> None:
    mp3 = parse_generation(_message(output_format={"container": "mp3", "bit_rate": 64000}), BYTES_CONTAINERS)
    assert (mp3.output_format.container, mp3.output_format.bit_rate) == ("mp3", 64000)
    with pytest.raises(ProtocolError, match="pcm_s16le"):
        parse_generation(_message(output_format={"container": "wav", "encoding": "pcm_mulaw"}), BYTES_CONTAINERS)


def test_answers_keep_context_id_even_when_null_and_errors_carry_no_done() -> None:
    error = json.loads(CartesiaError(context_id=None, status_code=400, code="invalid_message", error="bad").to_json())
    assert error == {"type": "error", "context_id": None, "status_code": 400, "code": "invalid_message", "error": "bad"}
    assert json.loads(CartesiaDone(context_id="c").to_json()) == {"type": "done", "context_id": "c", "done": True, "status_code": 200}
