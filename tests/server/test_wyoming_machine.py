"""Wyoming's protocol machine, as tables: a client event or a core event in, the commands and
frames out. No socket, no event loop, no engine (`voicestream.server.faces.wyoming`)."""

from __future__ import annotations

from typing import Any

import pytest
from wyoming.audio import AudioChunk
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.ping import Ping, Pong
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeVoice,
)

from voicestream.protocol import ErrorCode, SpeechFault, voice_catalog
from voicestream.server.contexts import (
    Audio,
    End,
    Ended,
    Failed,
    Feed,
    Flush,
    Marked,
    Open,
    Refused,
    Send,
    Sentence,
)
from voicestream.server.faces.wyoming import BadEvent, WyomingMachine, _State

VOICES = voice_catalog(["af_heart", "bf_emma", "ff_siwis"])


def machine() -> WyomingMachine:
    return WyomingMachine(VOICES)


def kinds(commands: list[Any]) -> list[str]:
    return [type(command).__name__ for command in commands]


def frame_types(commands: list[Any]) -> list[str]:
    return [command.frame.type for command in commands if isinstance(command, Send)]


def test_describe_and_ping_are_answered_with_frames_in_any_state() -> None:
    face = machine()
    for _ in range(2):
        (answer,) = face.receive(Describe().event())
        assert isinstance(answer, Send)
        (program,) = Info.from_event(answer.frame).tts
        assert program.supports_synthesize_streaming
        assert {voice.name: voice.languages for voice in program.voices}["bf_emma"] == ["en_GB"]
        assert face.receive(Ping(text="hi").event()) == [Send(Pong(text="hi").event())]
        face.receive(SynthesizeStart().event())
    assert face.state is _State.STREAMING


def test_synthesize_is_one_whole_context_answered_in_order_sentence_by_sentence() -> None:
    face = machine()
    commands = face.receive(Synthesize(text="Bonjour. Ceci est un test.", voice=SynthesizeVoice(language="fr_FR")).event())
    assert kinds(commands) == ["Open", "Feed", "End"]
    opened = commands[0]
    assert isinstance(opened, Open)
    assert (opened.context, opened.voice.voice, opened.in_order, opened.sentences) == ("wyoming-1", "ff_siwis", True, True)
    assert (opened.output.format, opened.output.sample_rate, opened.answer_id) == ("pcm16", 24000, None)
    assert commands[1:] == [Feed("wyoming-1", "Bonjour. Ceci est un test.", whole=True), End("wyoming-1")]
    assert face.state is _State.IDLE
    assert frame_types(face.event(Sentence("wyoming-1", ended=False))) == ["audio-start"]
    (chunk,) = face.event(Audio("wyoming-1", b"\x00\x01" * 240, 0.0, 0.01))
    assert isinstance(chunk, Send)
    assert AudioChunk.from_event(chunk.frame).audio == b"\x00\x01" * 240
    assert face.event(Audio("wyoming-1", b"", 0.01, 0.0)) == []
    assert frame_types(face.event(Sentence("wyoming-1", ended=True))) == ["audio-stop"]
    assert face.event(Ended("wyoming-1", completed=True)) == []
    assert face.utterances == set()
    with pytest.raises(ValueError, match="does not hold"):
        face.event(Audio("wyoming-1", b"late", 0.0, 0.01))


def test_a_stream_feeds_its_chunks_and_its_stop_flushes_ends_and_says_stopped() -> None:
    face = machine()
    (opened,) = face.receive(SynthesizeStart(voice=SynthesizeVoice(name="af_heart")).event())
    assert isinstance(opened, Open) and opened.max_delay_s == 0.3 and opened.voice.voice == "af_heart"
    assert face.receive(SynthesizeChunk(text="The first ").event()) == [Feed("wyoming-1", "The first ")]
    assert face.receive(Synthesize(text="The first sentence.").event()) == []  # Home Assistant's, for old servers
    stop = face.receive(SynthesizeStop().event())
    assert kinds(stop) == ["Flush", "End"] and isinstance(stop[0], Flush) and stop[0].context == "wyoming-1"
    assert face.state is _State.IDLE
    assert frame_types(face.event(Marked("wyoming-1", stop[0].mark))) == ["synthesize-stopped"]


def test_a_new_start_ends_the_stream_before_it() -> None:
    face = machine()
    face.receive(SynthesizeStart().event())
    commands = face.receive(SynthesizeStart().event())
    assert kinds(commands) == ["Flush", "End", "Open"]
    assert [command.context for command in commands] == ["wyoming-1", "wyoming-1", "wyoming-2"]  # type: ignore[union-attr]
    assert face.stream == "wyoming-2" and face.utterances == {"wyoming-1", "wyoming-2"}


@pytest.mark.parametrize(("event", "message"), [
    (SynthesizeChunk(text="no stream").event(), "synthesize-chunk outside a stream"),
    (SynthesizeStop().event(), "synthesize-stop outside a stream"),
    (Event(type="transcribe", data={}), "Unsupported event type 'transcribe'"),
    (Event(type="synthesize", data={"text": 7}), None),
    (Event(type="synthesize", data={}), None),
])
def test_a_bad_event_raises_and_changes_nothing(event: Event, message: str | None) -> None:
    face = machine()
    with pytest.raises(SpeechFault, match=message) as raised:
        face.receive(event)
    assert raised.value.code is ErrorCode.INVALID_MESSAGE or isinstance(raised.value, BadEvent)
    assert (face.state, face.utterances) == (_State.IDLE, set())


def test_a_stream_refused_by_its_language_drops_its_chunks_until_its_stop() -> None:
    face = machine()
    with pytest.raises(SpeechFault, match="No voice speaks 'xx'"):
        face.receive(SynthesizeStart(voice=SynthesizeVoice(language="xx")).event())
    assert face.state is _State.REFUSED
    assert face.receive(SynthesizeChunk(text="dropped").event()) == []
    assert face.receive(Synthesize(text="ignored").event()) == []
    assert face.receive(SynthesizeStop().event()) == []
    assert face.state is _State.IDLE
    with pytest.raises(BadEvent):
        face.receive(SynthesizeStop().event())


def test_a_stream_the_core_refuses_drops_its_chunks_until_its_stop() -> None:
    face = machine()
    face.receive(SynthesizeStart(voice=SynthesizeVoice(name="no_such_voice")).event())
    assert face.event(Refused("wyoming-1")) == []
    assert (face.state, face.stream, face.utterances) == (_State.REFUSED, None, set())
    assert face.receive(SynthesizeChunk(text="dropped").event()) == []
    assert face.receive(SynthesizeStop().event()) == []
    assert face.state is _State.IDLE


def test_a_failed_utterance_sends_nothing_more_of_its_own() -> None:
    face = machine()
    face.receive(Synthesize(text="Hi.").event())
    fault = SpeechFault(ErrorCode.INTERNAL, "broke")
    assert face.event(Failed("wyoming-1", fault)) == []
    assert face.event(Ended("wyoming-1", completed=False)) == []
    assert face.utterances == set()


@pytest.mark.parametrize(("start", "to"), [
    (_State.IDLE, _State.IDLE), (_State.STREAMING, _State.STREAMING), (_State.REFUSED, _State.REFUSED),
    (_State.REFUSED, _State.STREAMING),
])
def test_an_illegal_transition_raises(start: _State, to: _State) -> None:
    face = machine()
    face.state = start
    with pytest.raises(RuntimeError, match=f"from {start.value} to {to.value}"):
        face._move(to)
