"""The context faces' protocol machines, as tables: a client message or a core event in, the
commands and frames out. No socket, no event loop, no engine (`voicestream.server.contexts`)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from voicestream.engine.alignment import TimedWord as WordTiming
from voicestream.protocol import ProtocolError
from voicestream.protocol.deepgram import parse_speak_query
from voicestream.protocol.elevenlabs import parse_output_format
from voicestream.server.contexts import (
    Audio,
    Cancel,
    End,
    Ended,
    Failed,
    Feed,
    Finish,
    Flush,
    Marked,
    Open,
    Refused,
    Send,
)
from voicestream.server.faces.cartesia import CartesiaMachine
from voicestream.server.faces.deepgram import DeepgramMachine
from voicestream.server.faces.elevenlabs import SINGLE, ElevenLabsMachine, SocketOptions


def kinds(commands: list[Any]) -> list[str]:
    return [type(command).__name__ for command in commands]


def sent(commands: list[Any]) -> list[Any]:
    """The frames among ``commands``, JSON decoded."""
    return [json.loads(c.frame) if isinstance(c.frame, str) else c.frame for c in commands if isinstance(c, Send)]


# --- Cartesia ----------------------------------------------------------------------------------


def cartesia(context_id: str | None, transcript: str = "", **extra: object) -> str:
    message = {"transcript": transcript, "voice": {"mode": "id", "id": "af_heart"},
               "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}, **extra}
    if context_id is not None:
        message["context_id"] = context_id
    return json.dumps(message)


def test_cartesia_opens_a_context_on_its_first_message_then_feeds_flushes_and_ends_it() -> None:
    machine = CartesiaMachine()
    opened = machine.receive(cartesia("a", "Hello there. ", **{"continue": True, "max_buffer_delay_ms": 250}))
    assert kinds(opened) == ["Open", "Feed"]
    open_ = opened[0]
    assert isinstance(open_, Open)
    assert (open_.context, open_.answer_id, open_.voice.voice, open_.max_delay_s) == ("a", "a", "af_heart", 0.25)
    assert (open_.output.format, open_.output.sample_rate) == ("pcm16", 24000)
    assert machine.receive(cartesia("a", "More", flush=True, **{"continue": True})) == [Feed("a", "More"), Flush("a", 1)]
    assert machine.receive(cartesia("a", "", **{"continue": False})) == [Feed("a", ""), End("a")]
    with pytest.raises(ProtocolError, match="was ended") as ended:
        machine.receive(cartesia("a", "late"))
    assert ended.value.request_id == "a"


@pytest.mark.parametrize(("message", "error"), [
    (cartesia(None, "No id."), "context_id is required"),
    (cartesia("b", " ", flush=True), "no open context 'b' to flush"),
    ("[1, 2]", "JSON object"),
])
def test_cartesia_refuses_a_message_it_cannot_take_with_the_context_s_id(message: str, error: str) -> None:
    machine = CartesiaMachine()
    with pytest.raises(ProtocolError, match=error):
        machine.receive(message)
    assert machine.contexts == {}


def test_cartesia_cancel_drops_a_context_at_once_and_a_late_cancel_is_no_error() -> None:
    machine = CartesiaMachine()
    machine.receive(cartesia("a", "Speak this.", **{"continue": True}))
    assert machine.receive(json.dumps({"context_id": "a", "cancel": True})) == [Cancel("a")]
    assert machine.receive(json.dumps({"context_id": "a", "cancel": True})) == []
    assert kinds(machine.receive(cartesia("a", "Again."))) == ["Open", "Feed", "End"]  # the id may be used again


def test_cartesia_frames_words_before_their_audio_marks_flushes_and_says_done_only_when_complete() -> None:
    machine = CartesiaMachine()
    machine.receive(cartesia("a", "Hi there.", add_timestamps=True))
    word = WordTiming(word="Hi", start_s=1.5, end_s=1.75, start_char=0, end_char=2)
    frames = sent(machine.event(Audio("a", b"\x01\x02", 1.5, 0.5, (word,), 0.0125)))
    assert [f["type"] for f in frames] == ["timestamps", "chunk"]
    assert frames[0]["word_timestamps"] == {"words": ["Hi"], "start": [1.5], "end": [1.75]}
    assert base64.b64decode(frames[1]["data"]) == b"\x01\x02" and frames[1]["step_time"] == 12.5
    (flushed,) = sent(machine.event(Marked("a", 1)))
    assert (flushed["type"], flushed["flush_id"], flushed["done"]) == ("flush_done", 1, False)
    assert sent(machine.event(Ended("a", completed=True)))[0]["done"] is True
    with pytest.raises(ValueError, match="does not hold"):
        machine.event(Ended("a", completed=True))


def test_cartesia_a_failed_or_refused_context_sends_nothing_more_and_is_forgotten() -> None:
    machine = CartesiaMachine()
    machine.receive(cartesia("a", "One.", **{"continue": True}))
    machine.receive(cartesia("b", "Two.", **{"continue": True}))
    assert machine.event(Failed("a", ProtocolError("internal", "x"))) == []  # type: ignore[arg-type]
    assert machine.event(Ended("a", completed=False)) == []
    assert machine.event(Refused("b")) == []
    assert machine.contexts == {}


# --- ElevenLabs --------------------------------------------------------------------------------


def elevenlabs(multi: bool, auto_mode: bool = False) -> ElevenLabsMachine:
    return ElevenLabsMachine(SocketOptions("af_heart", parse_output_format("pcm_24000"), None, auto_mode, multi))


def test_elevenlabs_multi_keeps_alive_feeds_flushes_and_closes_after_a_final_flush() -> None:
    machine = elevenlabs(multi=True)
    assert machine.receive(json.dumps({"text": "", "context_id": "a"})) == []  # a keep-alive
    opened = machine.receive(json.dumps({"text": "Hello. ", "context_id": "a"}))
    assert kinds(opened) == ["Open", "Feed"] and opened[0].max_delay_s == 1.0  # type: ignore[union-attr]
    assert machine.receive(json.dumps({"text": "", "context_id": "a", "flush": True})) == [Feed("a", ""), Flush("a")]
    assert machine.receive(json.dumps({"context_id": "a", "close_context": True})) == [End("a")]
    assert sent(machine.event(Ended("a", completed=True))) == [{"isFinal": True, "contextId": "a"}]
    assert machine.receive(json.dumps({"context_id": "a", "close_context": True})) == []  # raced its isFinal


def test_elevenlabs_close_context_mid_answer_cancels_it_and_answers_final_at_once() -> None:
    machine = elevenlabs(multi=True, auto_mode=True)
    assert machine.receive(json.dumps({"text": "Hello there.", "context_id": "a"}))[0].max_delay_s == 0  # type: ignore[union-attr]
    closed = machine.receive(json.dumps({"context_id": "a", "close_context": True}))
    assert kinds(closed) == ["Cancel", "Send"] and sent(closed) == [{"isFinal": True, "contextId": "a"}]
    assert machine.contexts == {}


def test_elevenlabs_single_context_ends_on_empty_text_then_says_final_and_finishes() -> None:
    machine = elevenlabs(multi=False)
    assert kinds(machine.receive(json.dumps({"text": " "}))) == ["Open", "Feed"]
    assert machine.receive(json.dumps({"text": "Hi."})) == [Feed(SINGLE, "Hi.")]
    assert machine.receive(json.dumps({"text": ""})) == [End(SINGLE)]
    out = machine.event(Ended(SINGLE, completed=True))
    assert sent(out) == [{"isFinal": True}] and isinstance(out[-1], Finish)
    with pytest.raises(ProtocolError, match="the input has ended"):
        machine.receive(json.dumps({"text": "More."}))


def test_elevenlabs_audio_carries_its_characters_timed_from_its_own_start() -> None:
    machine = elevenlabs(multi=True)
    machine.receive(json.dumps({"text": "Hi.", "context_id": "a"}))
    word = WordTiming(word="Hi", start_s=2.1, end_s=2.3, start_char=0, end_char=2)
    (answer,) = sent(machine.event(Audio("a", b"\x00\x00", 2.0, 0.5, (word,))))
    assert answer["contextId"] == "a" and answer["alignment"]["chars"] == [" ", "H", "i", " "]
    assert answer["alignment"]["charStartTimesMs"] == [0, 100, 200, 300]


# --- Deepgram ----------------------------------------------------------------------------------


def deepgram() -> DeepgramMachine:
    return DeepgramMachine(parse_speak_query({"model": "aura-2-thalia-en"}, socket=True), "rid")


def test_deepgram_says_its_metadata_then_opens_an_utterance_with_the_first_text() -> None:
    machine = deepgram()
    (metadata,) = sent(machine.start())
    assert metadata["type"] == "Metadata" and metadata["request_id"] == "rid"
    opened = machine.receive(json.dumps({"type": "Speak", "text": "Hello"}))
    assert kinds(opened) == ["Open", "Feed"]
    assert (opened[0].context, opened[0].request_id, opened[0].max_delay_s) == ("1", "rid:1", 3.0)  # type: ignore[union-attr]
    assert machine.receive(json.dumps({"type": "Flush"})) == [Flush("1", 0)]
    assert sent(machine.event(Marked("1", 0))) == [{"type": "Flushed", "sequence_id": 0}]
    assert machine.event(Audio("1", b"pcm", 0.0, 0.1)) == [Send(b"pcm")]


def test_deepgram_clear_drops_the_utterance_and_the_next_text_starts_afresh() -> None:
    machine = deepgram()
    machine.receive(json.dumps({"type": "Speak", "text": "Hello"}))
    cleared = machine.receive(json.dumps({"type": "Clear"}))
    assert kinds(cleared) == ["Cancel", "Send"] and sent(cleared) == [{"type": "Cleared", "sequence_id": 0}]
    assert machine.receive(json.dumps({"type": "Speak", "text": "Again"}))[0].context == "2"  # type: ignore[union-attr]


def test_deepgram_close_speaks_the_rest_then_finishes_and_takes_nothing_more() -> None:
    machine = deepgram()
    machine.receive(json.dumps({"type": "Speak", "text": "Hello"}))
    assert machine.receive(json.dumps({"type": "Close"})) == [End("1")]
    with pytest.raises(ProtocolError, match="after Close"):
        machine.receive(json.dumps({"type": "Speak", "text": "late"}))
    assert machine.event(Ended("1", completed=True)) == [Finish()]
    assert deepgram().receive(json.dumps({"type": "Close"})) == [Finish()]  # nothing to speak


def test_deepgram_a_failed_or_refused_utterance_gives_way_to_a_new_one() -> None:
    machine = deepgram()
    machine.receive(json.dumps({"type": "Speak", "text": "Hello"}))
    assert machine.event(Ended("1", completed=False)) == []
    machine.receive(json.dumps({"type": "Speak", "text": "Next"}))
    assert machine.event(Refused("2")) == []
    assert machine.receive(json.dumps({"type": "Speak", "text": "Third"}))[0].context == "3"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="does not hold"):
        machine.event(Ended("1", completed=True))
