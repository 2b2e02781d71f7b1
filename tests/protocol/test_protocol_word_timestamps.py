"""The session's opt-in word timestamps: the request field and the frame."""

from __future__ import annotations

import pytest

from voicestream.protocol import (
    ErrorCode,
    ProtocolError,
    WordTimestamps,
    WordTiming,
    parse_client_message,
    parse_server_frame,
)


def test_word_timestamps_are_off_unless_asked() -> None:
    assert not parse_client_message('{"text":"hi"}').word_timestamps
    assert parse_client_message('{"text":"hi","word_timestamps":true}').word_timestamps is True


def test_word_timestamps_must_be_a_boolean() -> None:
    with pytest.raises(ProtocolError) as raised:
        parse_client_message('{"text":"hi","word_timestamps":1}')
    assert raised.value.code is ErrorCode.INVALID_MESSAGE
    assert "word_timestamps" in raised.value.message


def test_the_frame_round_trips() -> None:
    frame = WordTimestamps(request_id="r1", words=(WordTiming(word="Dr.", start_s=0.05, end_s=0.4),))
    assert frame.to_json() == (
        '{"type":"word_timestamps","request_id":"r1","words":[{"word":"Dr.","start_s":0.05,"end_s":0.4}]}'
    )
    assert parse_server_frame(frame.to_json()) == frame
