"""ElevenLabs' messages and the character alignment derived from word times (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicestream.protocol import ProtocolError, WordTiming
from voicestream.protocol.elevenlabs import (
    AudioAnswer,
    FinalAnswer,
    SocketAlignment,
    char_alignment,
    parse_output_format,
    parse_socket_message,
    parse_speech_request,
)


def _word(word: str, start_s: float, end_s: float) -> WordTiming:
    return WordTiming(word=word, start_s=start_s, end_s=end_s)


def test_each_word_shares_its_span_and_spaces_hold_the_gaps() -> None:
    times = char_alignment([_word("Hi,", 0.1, 0.4), _word("you.", 0.5, 0.9)], 0.0, 1.0)
    assert "".join(times.chars) == " Hi, you. "
    assert times.starts_ms == (0, 100, 200, 300, 400, 500, 600, 700, 800, 900)
    assert times.durations_ms == (100,) * 10


def test_times_count_from_the_span_start_and_words_are_clipped_to_it() -> None:
    """A windowed piece's last word may start before the part that carries it; the last word
    is always followed by a space, if only for no time."""
    times = char_alignment([_word("long", 1.8, 2.4)], 2.0, 2.5)
    assert times.chars == ("l", "o", "n", "g", " ")
    assert times.starts_ms[0] == 0 and times.starts_ms[-1] + times.durations_ms[-1] == 500
    assert char_alignment([_word("end", 0.0, 0.3)], 0.0, 0.3).durations_ms == (100, 100, 100, 0)


def test_no_words_no_characters() -> None:
    assert char_alignment([], 0.0, 1.0).chars == ()


@given(st.lists(st.tuples(st.text("abc,.", min_size=1, max_size=6), st.floats(0, 3), st.floats(0, 1)), max_size=8),
       st.floats(0, 3), st.floats(0, 3))
def test_characters_cover_the_audio_in_order(words: list[tuple[str, float, float]], start: float, length: float) -> None:
    timed = [_word(text, begin, begin + span) for text, begin, span in words]
    times = char_alignment(timed, start, start + length)
    assert len(times.chars) == len(times.starts_ms) == len(times.durations_ms)
    assert "".join(times.chars).split() == [text for text, _, _ in words]
    assert all(d >= 0 for d in times.durations_ms)
    assert all(b == a + d for a, d, b in zip(times.starts_ms, times.durations_ms, times.starts_ms[1:], strict=False))
    if times.chars:
        assert times.starts_ms[0] == 0
        assert times.starts_ms[-1] + times.durations_ms[-1] == round(length * 1000)


@pytest.mark.parametrize(("name", "fmt", "rate", "bit_rate"), [
    ("pcm_24000", "pcm16", 24000, None), ("pcm_16000", "pcm16", 16000, None), ("ulaw_8000", "mulaw", 8000, None),
    ("mp3_44100_128", "mp3", 44100, 128_000), ("mp3_22050_32", "mp3", 22050, 32_000),
    ("opus_48000_64", "opus", 48000, 64_000), ("wav_22050", "wav", 22050, None),
])
def test_output_formats_map_onto_encoders(name: str, fmt: str, rate: int, bit_rate: int | None) -> None:
    parsed = parse_output_format(name)
    assert (parsed.format, parsed.sample_rate, parsed.bit_rate) == (fmt, rate, bit_rate)


@pytest.mark.parametrize(("name", "code"), [
    ("alaw_8000", "unsupported_format"), ("pcm_32000", "unsupported_sample_rate"), ("ulaw_16000", "unsupported_sample_rate"),
    ("pcm_24000_64", "unsupported_format"), ("mp3_44100_1000", "unsupported_format"), ("mp3", "unsupported_format"),
])
def test_unknown_formats_are_typed_errors(name: str, code: str) -> None:
    with pytest.raises(ProtocolError) as error:
        parse_output_format(name)
    assert error.value.code == code and name in error.value.message


def test_messages_parse_strictly_and_answers_are_camel_case() -> None:
    init = parse_socket_message({"text": " ", "context_id": "c", "voice_settings": {"speed": 1.1, "stability": 0.5}})
    assert init.speed == 1.1 and init.text == " "
    for bad in ({"text": 1}, {"context_id": ""}, {"flush": "yes"}, {"voice_settings": {"speed": "fast"}}):
        with pytest.raises(ProtocolError):
            parse_socket_message(bad)
    with pytest.raises(ProtocolError) as missing:
        parse_speech_request({"model_id": "eleven_flash_v2_5"})
    assert missing.value.code == "text_required"
    alignment = SocketAlignment.of(char_alignment([_word("Hi", 0.0, 0.2)], 0.0, 0.2))
    assert AudioAnswer(context_id="c", audio="AA==", alignment=alignment).to_json() == (
        '{"contextId":"c","audio":"AA==","alignment":{"chars":["H","i"," "],"charStartTimesMs":[0,100,200],"charDurationsMs":[100,100,0]}}'
    )
    assert FinalAnswer().to_json() == '{"isFinal":true}'
