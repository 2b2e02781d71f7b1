"""Deepgram's query and messages as the protocol layer reads them (pure: no server)."""

import pytest

from voicestream.catalog import describe_voice
from voicestream.protocol import ErrorCode, ProtocolError
from voicestream.protocol.deepgram import (
    AURA_VOICES,
    ENGLISH_STAND_INS,
    kokoro_voice,
    parse_socket_message,
    parse_speak_query,
)


def test_every_aura_voice_is_a_kokoro_voice_of_its_language() -> None:
    assert len(AURA_VOICES) > 100
    for model, voice in AURA_VOICES.items():
        language, spoken = describe_voice(voice).language, model.rsplit("-", 1)[1]
        expected = "en" if spoken in ENGLISH_STAND_INS else spoken  # Kokoro has no German or Dutch
        assert language is not None and language.startswith(expected), (model, voice)


def test_model_ids_name_aura_voices_or_kokoro_voices() -> None:
    assert kokoro_voice("aura-2-thalia-en") == kokoro_voice("aura-thalia-en") == "af_heart"
    assert kokoro_voice("af_bella am_adam") == "af_bella+am_adam"  # an unescaped + in a query
    assert kokoro_voice("aura-2-viktoria-de") == kokoro_voice("aura-2-rhea-nl") == "af_heart"  # English stand-ins
    assert kokoro_voice("aura-2-julius-de") == kokoro_voice("aura-2-sander-nl") == "am_michael"
    assert kokoro_voice("aura-2-hector-fr") == "ff_siwis"  # Kokoro's one French voice
    assert [kokoro_voice(f"aura-2-{name}") for name in ("livia-it", "perseo-it", "izanami-ja", "fujin-ja", "gloria-es",
                                                        "valerio-es")] == ["if_sara", "im_nicola", "jf_alpha", "jm_kumo",
                                                                           "ef_dora", "em_alex"]
    with pytest.raises(ProtocolError) as unknown:
        kokoro_voice("aura-2-nobody-en")
    assert unknown.value.code is ErrorCode.UNKNOWN_VOICE


@pytest.mark.parametrize(("query", "socket", "format", "rate"), [
    ({}, True, "pcm16", 24000),  # the socket's audio is raw: no WAV header before each piece
    ({"container": "wav"}, True, "pcm16", 24000),
    ({}, False, "mp3", 24000),
    ({"encoding": "linear16", "container": "none", "sample_rate": "16000"}, False, "pcm16", 16000),
    ({"encoding": "mulaw"}, True, "mulaw", 8000),
    ({"encoding": "alaw", "sample_rate": "16000"}, True, None, 16000),
])
def test_query_defaults_follow_deepgram(query: dict[str, str], socket: bool, format: str | None, rate: int) -> None:
    options = parse_speak_query(query, socket=socket)
    assert (options.format, options.rate) == (format, rate)


@pytest.mark.parametrize(("query", "socket", "code"), [
    ({"encoding": "mp3"}, True, ErrorCode.UNSUPPORTED_FORMAT),
    ({"encoding": "ogg-vorbis"}, False, ErrorCode.UNSUPPORTED_FORMAT),
    ({"encoding": "mulaw", "container": "wav"}, False, ErrorCode.UNSUPPORTED_FORMAT),
    ({"sample_rate": "32000"}, False, ErrorCode.UNSUPPORTED_SAMPLE_RATE),
    ({"sample_rate": "fast"}, False, ErrorCode.UNSUPPORTED_SAMPLE_RATE),
    ({"speed": "-1"}, False, ErrorCode.INVALID_SPEED),
    ({"model": "aura-2-nobody-en"}, True, ErrorCode.UNKNOWN_VOICE),
])
def test_a_query_that_cannot_be_served_names_its_problem(query: dict[str, str], socket: bool, code: ErrorCode) -> None:
    with pytest.raises(ProtocolError) as refused:
        parse_speak_query(query, socket=socket)
    assert refused.value.code is code


@pytest.mark.parametrize("message", [{"type": "Shout"}, {"type": "Speak"}, {"type": "Speak", "text": 7}, {"text": "hi"}])
def test_a_bad_socket_message_is_invalid_message(message: dict) -> None:
    with pytest.raises(ProtocolError) as bad:
        parse_socket_message(message)
    assert bad.value.code is ErrorCode.INVALID_MESSAGE


def test_socket_messages() -> None:
    assert parse_socket_message({"type": "Speak", "text": "Hi "}).text == "Hi "
    assert [parse_socket_message({"type": kind}).type for kind in ("Flush", "Clear", "Close")] == ["Flush", "Clear", "Close"]
