"""Wyoming's event data in the protocol layer: table tests of the pure parser (no server)."""

from __future__ import annotations

from typing import Any

import pytest

from voicestream.protocol import ErrorCode, ProtocolError
from voicestream.protocol.wyoming import (
    WyomingSynthesize,
    WyomingSynthesizeChunk,
    WyomingSynthesizeStart,
    parse_event_data,
)


def test_home_assistants_synthesize_parses() -> None:
    event = parse_event_data(WyomingSynthesize, {"text": "Hello.", "voice": {"name": "af_heart", "speaker": None}})
    assert (event.text, event.voice.name, event.voice.language) == ("Hello.", "af_heart", None)
    assert parse_event_data(WyomingSynthesizeStart, {"voice": {"language": "fr_FR"}}).voice.language == "fr_FR"
    assert parse_event_data(WyomingSynthesizeStart, {}).voice.name is None
    assert parse_event_data(WyomingSynthesizeChunk, {"text": "  "}).text == "  "


@pytest.mark.parametrize(
    ("model", "data", "words"),
    [
        (WyomingSynthesize, {}, "words to speak"),
        (WyomingSynthesize, {"text": "   "}, "words to speak"),
        (WyomingSynthesize, {"text": 7}, "words to speak"),
        (WyomingSynthesize, {"text": "Hi.", "voice": "af_heart"}, "voice must be an object"),
        (WyomingSynthesize, {"text": "Hi.", "voice": {"name": 3}}, "voice must be an object"),
        (WyomingSynthesizeStart, {"voice": {"language": ["en"]}}, "voice must be an object"),
        (WyomingSynthesizeChunk, {}, "text must be a string"),
        (WyomingSynthesizeChunk, {"text": None}, "text must be a string"),
    ],
)
def test_bad_data_is_an_invalid_message(model: type, data: dict[str, Any], words: str) -> None:
    with pytest.raises(ProtocolError) as raised:
        parse_event_data(model, data)
    assert raised.value.code == ErrorCode.INVALID_MESSAGE
    assert words in raised.value.message
