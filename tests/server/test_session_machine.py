"""The session's protocol machine, as tables: a client message or a core event in, the commands
and frames out. No socket, no event loop, no engine (`voicestream.server.faces.session`)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.server.test_face_machines import kinds
from tests.server.test_face_machines import sent as frames

from voicestream.engine.alignment import TimedWord
from voicestream.protocol import ErrorCode, ProtocolError, SpeechFault
from voicestream.server.contexts import (
    Audio,
    Cancel,
    End,
    Ended,
    Failed,
    Feed,
    Finish,
    Marked,
    Open,
    Refused,
    Sentence,
    Turn,
    WaitSent,
    place,
)
from voicestream.server.faces.session import SessionMachine, _Phase, _State
from voicestream.text import STREAMED, STREAMED_SENTENCES, IncrementalSentenceChunker


def message(**fields: object) -> str:
    return json.dumps(fields)


def whole(rid: str, text: str = "Hello there.", **extra: object) -> str:
    return message(text=text, request_id=rid, **extra)


def piece(rid: str, text: str, more: bool, **extra: object) -> str:
    return message(text=text, request_id=rid, **{"continue": more}, **extra)


# --- whole requests ------------------------------------------------------------------------------


def test_a_whole_request_is_one_context_queued_at_open_and_answered_in_order() -> None:
    face = SessionMachine(max_requests=4)
    (opened,) = face.receive(whole("r1", voice="bf_emma", speed=1.2, lang="en-gb", format="mp3", sample_rate=16000,
                                   word_timestamps=True))
    assert isinstance(opened, Open)
    assert (opened.context, opened.request_id, opened.answer_id, opened.in_order) == ("session-1", "r1", "r1", True)
    assert (opened.text, opened.max_delay_s, opened.sentences) == ("Hello there.", None, False)
    assert (opened.voice.voice, opened.voice.speed, opened.voice.language) == ("bf_emma", 1.2, "en-gb")
    assert (opened.output.format, opened.output.sample_rate, opened.output.word_timestamps) == ("mp3", 16000, True)
    assert face.requests["session-1"].state is _State.COMPLETE
    assert frames(face.event(Turn("session-1"))) == [
        {"type": "synthesis_start", "request_id": "r1", "format": "mp3", "sample_rate": 16000, "channels": 1}]
    word = TimedWord("Hello", 0.05, 0.4, 0, 5)
    assert frames(face.event(Audio("session-1", b"\x01\x02", 0.0, 0.5, (word,)))) == [
        {"type": "word_timestamps", "request_id": "r1",
         "words": [{"word": "Hello", "start_s": 0.05, "end_s": 0.4, "start_char": 0, "end_char": 5}]},
        b"\x01\x02",
    ]
    assert frames(face.event(Audio("session-1", b"\x03", 0.5, 0.1))) == [b"\x03"]
    (complete,) = frames(face.event(Ended("session-1", True, 3, 0.612345, 1.234567, 0.25)))
    assert complete == {"type": "synthesis_complete", "request_id": "r1", "audio_bytes": 3,
                        "total_duration_s": 0.6123, "elapsed_s": 1.2346, "first_audio_ms": 250.0}
    assert face.requests == {}


def test_a_request_without_an_id_gets_one_and_opus_starts_at_the_rate_it_is_carried_at() -> None:
    face = SessionMachine(max_requests=4)
    (opened,) = face.receive(message(text="Hi.", format="opus", sample_rate=22050))
    assert isinstance(opened, Open) and opened.answer_id and opened.answer_id == opened.request_id
    (start,) = frames(face.event(Turn(opened.context)))
    assert (start["request_id"], start["format"], start["sample_rate"]) == (opened.answer_id, "opus", 24000)


def test_requests_keep_their_order_and_a_repeated_id_is_a_request_of_its_own() -> None:
    face = SessionMachine(max_requests=4)
    contexts = [face.receive(whole(rid))[0].context for rid in ("a", "b", "a")]  # type: ignore[union-attr]
    assert contexts == ["session-1", "session-2", "session-3"]
    assert [request.request_id for request in face.requests.values()] == ["a", "b", "a"]


def test_a_whole_request_the_core_refuses_is_forgotten() -> None:
    face = SessionMachine(max_requests=1)
    face.receive(whole("r"))
    assert face.event(Refused("session-1")) == []
    assert face.requests == {}
    assert kinds(face.receive(whole("again"))) == ["Open"]  # its place is free


def test_a_failed_request_ends_with_its_error_frame_alone() -> None:
    face = SessionMachine(max_requests=4)
    face.receive(whole("r"))
    face.event(Turn("session-1"))
    assert face.event(Failed("session-1", SpeechFault(ErrorCode.INTERNAL, "broken", "r"))) == []
    assert face.requests["session-1"].state is _State.FAILED
    assert face.event(Ended("session-1", completed=False)) == []
    assert face.requests == {}


@pytest.mark.parametrize(("payload", "code"), [
    (b"{not json", ErrorCode.INVALID_JSON),
    (message(type="dance"), ErrorCode.INVALID_MESSAGE),
    (message(type="synthesize", request_id="t"), ErrorCode.TEXT_REQUIRED),
    (message(text="hi", format="wma", request_id="t"), ErrorCode.UNSUPPORTED_FORMAT),
    (message(text="hi", sample_rate=11025, request_id="t"), ErrorCode.UNSUPPORTED_SAMPLE_RATE),
    (message(text="Hi", **{"continue": True}), ErrorCode.INVALID_MESSAGE),  # a piece needs its request_id
    (piece("f", "Hi", True, format="wav"), ErrorCode.UNSUPPORTED_FORMAT),  # a piece's format is raw
])
def test_a_bad_message_raises_its_fault_and_changes_nothing(payload: str | bytes, code: ErrorCode) -> None:
    face = SessionMachine(max_requests=4)
    with pytest.raises(SpeechFault) as raised:
        face.receive(payload)
    assert raised.value.code is code
    assert face.requests == {} and face.phase is _Phase.OPEN


# --- streamed utterances -----------------------------------------------------------------------


def test_pieces_feed_one_context_and_the_last_ends_it() -> None:
    face = SessionMachine(max_requests=4)
    first = face.receive(piece("u", "It costs $", True, format="mulaw", sample_rate=8000))
    assert kinds(first) == ["Open", "Feed"]
    opened = first[0]
    assert isinstance(opened, Open)
    assert (opened.context, opened.text, opened.schedule, opened.in_order) == ("session-1", None, STREAMED, True)
    assert first[1] == Feed("session-1", "It costs $")
    assert face.requests["session-1"].state is _State.TAKING
    assert face.receive(piece("u", "5, said Dr", True)) == [Feed("session-1", "5, said Dr")]
    assert face.receive(piece("u", "", False)) == [Feed("session-1", ""), End("session-1")]
    assert face.requests["session-1"].state is _State.COMPLETE
    assert frames(face.event(Turn("session-1")))[0] == {
        "type": "synthesis_start", "request_id": "u", "format": "mulaw", "sample_rate": 8000, "channels": 1}


@pytest.mark.parametrize(("chunking", "schedule"), [(None, STREAMED), ("latency", STREAMED), ("sentences", STREAMED_SENTENCES)])
def test_chunking_picks_the_schedule_and_one_last_piece_alone_is_an_utterance(chunking: str | None, schedule: object) -> None:
    face = SessionMachine(max_requests=4)
    commands = face.receive(piece("u", "Just this.", False, **({"chunking": chunking} if chunking else {})))
    assert kinds(commands) == ["Open", "Feed", "End"]
    assert commands[0].schedule is schedule  # type: ignore[union-attr]


@pytest.mark.parametrize("first", [whole("w"), piece("w", "Done.", False)], ids=["whole", "last-piece-came"])
def test_a_request_that_took_all_its_text_takes_no_more(first: str) -> None:
    face = SessionMachine(max_requests=4)
    face.receive(first)
    with pytest.raises(ProtocolError, match="takes no more text") as raised:
        face.receive(piece("w", " more", False))
    assert raised.value.code is ErrorCode.INVALID_MESSAGE and raised.value.request_id == "w"
    face.event(Turn("session-1"))
    face.event(Ended("session-1", True))
    assert kinds(face.receive(piece("w", "A new one.", False))) == ["Open", "Feed", "End"]  # once answered, a new id


def test_streamed_pieces_words_are_placed_in_the_whole_utterances_text() -> None:
    """The pieces cut where they fall ("$", "5,"; "Dr", ". Lee"); the chunker (as the context's
    speech runs it) makes sentences of them, the engine times each sentence's words in its own
    text and audio, and `place` (the runner's one re-basing) puts them in the utterance's text
    and audio: each word's offsets hold it in the text as the client sent it, in time order,
    and the machine writes them as they are."""
    pieces = ["It costs $", "5, said Dr", ". Lee. This is **bo", "ld** text."]
    text = "".join(pieces)
    chunker = IncrementalSentenceChunker(STREAMED_SENTENCES)
    sentences = [chunk for fed in pieces for chunk in chunker.feed_chunks(fed)] + chunker.flush_chunks()
    assert len(sentences) == 2
    face = SessionMachine(max_requests=4)
    for index, fed in enumerate(pieces):
        face.receive(piece("u", fed, index < len(pieces) - 1, word_timestamps=True, chunking="sentences"))
    face.event(Turn("session-1"))
    sent: list[dict[str, Any]] = []
    audio_s = 0.0
    for sentence in sentences:
        own = [  # the engine's words: offsets in the sentence's text, times from its audio's start
            TimedWord(written, 0.1 * n, 0.1 * n + 0.08, sentence.raw.index(written), sentence.raw.index(written) + len(written))
            for n, written in enumerate(sentence.raw.replace("**", "").split())
        ]
        words = place(own, sentence.start, audio_s)
        for frame in frames(face.event(Audio("session-1", b"\x00\x00", audio_s, 1.0, words))):
            if isinstance(frame, dict):
                sent += frame["words"]
        audio_s += 1.0
    assert [w["word"] for w in sent] == ["It", "costs", "$5,", "said", "Dr.", "Lee.", "This", "is", "bold", "text."]
    for word in sent:
        assert word["word"] in text[word["start_char"]:word["end_char"]].replace("**", "")
    assert [w["start_s"] for w in sent] == sorted(w["start_s"] for w in sent)
    assert sent[6]["start_s"] == pytest.approx(1.0)  # the second sentence's first word, in the utterance's audio


# --- cancel, close, the limit -------------------------------------------------------------------


def test_cancel_all_is_answered_in_each_requests_place() -> None:
    face = SessionMachine(max_requests=4)
    face.receive(whole("speaking"))
    face.receive(whole("queued"))
    face.receive(piece("open", "Hold on", True))
    face.event(Turn("session-1"))
    assert face.receive(message(type="cancel")) == [
        Cancel("session-1", answered=True), Cancel("session-2", answered=True), Cancel("session-3", answered=True)]
    assert {request.state for request in face.requests.values()} == {_State.CANCELLED}
    assert face.receive(message(type="cancel")) == []  # already cancelled: nothing more to do
    # the one being spoken ends cancelled (however much of its audio went out)
    assert frames(face.event(Ended("session-1", completed=False))) == [
        {"type": "synthesis_cancelled", "request_id": "speaking"}]
    # one cancelled before its turn sends no start, only its cancelled frame
    for context, rid in (("session-2", "queued"), ("session-3", "open")):
        assert face.event(Turn(context)) == []
        assert frames(face.event(Ended(context, completed=False))) == [{"type": "synthesis_cancelled", "request_id": rid}]
    assert face.requests == {}


def test_cancel_one_by_id_leaves_the_others() -> None:
    face = SessionMachine(max_requests=4)
    face.receive(whole("keep"))
    face.receive(whole("drop"))
    assert face.receive(message(type="cancel", request_id="drop")) == [Cancel("session-2", answered=True)]
    assert face.receive(message(type="cancel", request_id="unknown")) == []
    assert face.requests["session-1"].state is _State.COMPLETE
    # an utterance's id is free again once it is cancelled: a piece with it opens a new one
    face.receive(piece("c", "Will be dropped", True))
    face.receive(message(type="cancel", request_id="c"))
    assert kinds(face.receive(piece("c", "A new one", True))) == ["Open", "Feed"]


def test_a_cancel_that_comes_after_the_whole_audio_still_ends_cancelled() -> None:
    face = SessionMachine(max_requests=4)
    face.receive(whole("late"))
    face.event(Turn("session-1"))
    face.receive(message(type="cancel", request_id="late"))
    assert frames(face.event(Ended("session-1", completed=True, audio_bytes=10))) == [
        {"type": "synthesis_cancelled", "request_id": "late"}]


def test_close_ends_open_utterances_finishes_and_reads_nothing_more() -> None:
    face = SessionMachine(max_requests=4)
    face.receive(whole("w"))
    face.receive(piece("u", "Half a", True))
    assert face.receive(message(type="close")) == [End("session-2"), Finish()]
    assert face.phase is _Phase.CLOSING and face.requests["session-2"].state is _State.COMPLETE
    with pytest.raises(RuntimeError, match="reads no more"):
        face.receive(whole("after"))


def test_busy_at_the_limit_until_a_request_is_answered() -> None:
    face = SessionMachine(max_requests=2)
    face.receive(whole("a"))
    face.receive(piece("b", "Open", True))
    for payload in (whole("c"), piece("d", "New", True)):
        with pytest.raises(SpeechFault) as raised:
            face.receive(payload)
        assert raised.value.code is ErrorCode.BUSY and raised.value.request_id in ("c", "d")
        assert "already has 2 requests waiting to be sent" in raised.value.message
    assert face.receive(piece("b", " more", True)) == [Feed("session-2", " more")]  # an open one still takes text
    face.receive(message(type="cancel", request_id="a"))  # a cancelled one holds its place until answered
    with pytest.raises(SpeechFault):
        face.receive(whole("c"))
    face.event(Turn("session-1"))
    face.event(Ended("session-1", completed=False))
    assert kinds(face.receive(whole("c"))) == ["Open"]


def test_sequential_waits_after_every_message() -> None:
    face = SessionMachine(max_requests=4, sequential=True)
    assert kinds(face.receive(whole("a"))) == ["Open", "WaitSent"]
    assert face.receive(message(type="cancel", request_id="a")) == [Cancel("session-1", answered=True), WaitSent()]
    assert face.receive(message(type="close")) == [Finish(), WaitSent()]


# --- illegal transitions -------------------------------------------------------------------------


def test_events_a_session_never_asks_for_or_of_requests_it_does_not_hold_raise() -> None:
    face = SessionMachine(max_requests=4)
    with pytest.raises(ValueError, match="does not hold"):
        face.event(Turn("session-1"))
    face.receive(whole("r"))
    for event in (Marked("session-1", 1), Sentence("session-1", ended=False)):
        with pytest.raises(ValueError, match="no markers or sentences"):
            face.event(event)
    face.event(Turn("session-1"))
    with pytest.raises(RuntimeError, match="began twice"):
        face.event(Turn("session-1"))
    face.event(Failed("session-1", SpeechFault(ErrorCode.INTERNAL, "broken")))
    with pytest.raises(RuntimeError, match="cannot go from failed to failed"):
        face.event(Failed("session-1", SpeechFault(ErrorCode.INTERNAL, "again")))
    face.event(Ended("session-1", completed=False))
    with pytest.raises(ValueError, match="does not hold"):
        face.event(Audio("session-1", b"late", 0.0, 0.01))


def test_a_request_never_goes_back_to_taking_text() -> None:
    face = SessionMachine(max_requests=4)
    face.receive(whole("r"))
    request = face.requests["session-1"]
    for to in (_State.TAKING, _State.COMPLETE):
        with pytest.raises(RuntimeError, match="cannot go from complete"):
            request.move(to)
    request.move(_State.CANCELLED)
    for to in (_State.TAKING, _State.COMPLETE, _State.CANCELLED):
        with pytest.raises(RuntimeError, match="cannot go from cancelled"):
            request.move(to)


def test_the_error_frame_is_the_sessions() -> None:
    frame = json.loads(SessionMachine.fault_frame(SpeechFault(ErrorCode.BUSY, "Too many.", "r")))
    assert frame == {"type": "error", "request_id": "r", "code": "busy", "message": "Too many."}
