"""`SpeechSession` and `SyncSpeechSession` against the real speech server on 127.0.0.1."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from tests.client.client_helpers import CuttableProxy, RecordingTransport, WordStream

from voicestream.client import (
    AudioChunk,
    ConnectionLostError,
    InvalidRequestError,
    RequestState,
    SessionState,
    SpeechBusyError,
    SpeechCancelled,
    SpeechCompleted,
    SpeechEvent,
    SpeechFailed,
    SpeechSession,
    SpeechStarted,
    SyncSpeechSession,
    WordTimes,
)

SENTENCES = [
    "Hello there.",
    (
        "This second sentence keeps going for a good while, so that the first one is heard "
        "in full while the model is still busy writing these words down, one after another, "
        "at the pace of a model."
    ),
    "Bye for now.",
]


def _kinds(events: list[SpeechEvent], request_id: str) -> list[str]:
    return [type(e).__name__ for e in events if getattr(e, "request_id", None) == request_id]


async def _until_finished(session: SpeechSession, count: int) -> list[SpeechEvent]:
    """The session's events until `count` requests have finished."""
    events: list[SpeechEvent] = []
    async for event in session.events():
        events.append(event)
        if (
            sum(isinstance(e, SpeechCompleted | SpeechCancelled | SpeechFailed) for e in events)
            == count
        ):
            break
    return events


async def test_speak_streams_text_as_one_utterance_over_one_session(warm_server: str) -> None:
    """The text goes out raw, word by word, as pieces of one streamed utterance, and the
    third sentence is held back until audio arrives: the first words must be heard while the
    text is still being written (a deterministic condition, not a race). The server cut it,
    so the words come back as written, at their offsets in the whole text."""
    transport = RecordingTransport(warm_server)
    sentence_3_starts_at_word = len(" ".join(SENTENCES[:2]).split(" "))
    written = " ".join(SENTENCES)
    text = WordStream(written, delay_s=0.02, hold_at=sentence_3_starts_at_word)
    first_audio_at: float | None = None
    events: list[SpeechEvent] = []
    async with await SpeechSession.connect(transport, word_timestamps=True) as session:
        async for event in session.speak(text):
            events.append(event)
            if isinstance(event, AudioChunk) and first_audio_at is None:
                first_audio_at = time.perf_counter()
                assert len(text.fed_at) <= sentence_3_starts_at_word
                text.release.set()
    assert session.state is SessionState.CLOSED
    assert first_audio_at is not None
    (done,) = [e for e in events if isinstance(e, SpeechCompleted)]
    audio = b"".join(e.data for e in events if isinstance(e, AudioChunk))
    assert len(audio) == done.audio_bytes > 0
    assert done.total_duration_s == pytest.approx(len(audio) / 2 / 24000, abs=0.01)
    words = [w for e in events if isinstance(e, WordTimes) for w in e.words]
    assert [w.word for w in words] == written.split()
    assert [written[w.start_char : w.end_char] for w in words] == written.split()
    sent = transport.sent_types()
    assert sent[-1] == "close" and set(sent[:-1]) == {"synthesize"} and len(sent) > 3


@pytest.mark.parametrize("send_binary", [False, True], ids=["text-frames", "binary-frames"])
async def test_requests_are_answered_in_order_with_text_or_binary_frames(
    warm_server: str, send_binary: bool
) -> None:
    transport = RecordingTransport(warm_server, send_binary=send_binary)
    async with await SpeechSession.connect(transport) as session:
        first = await session.submit("One.", request_id="r-one")
        second = await session.submit("Two.")
        events = await _until_finished(session, 2)
    assert first == "r-one"
    for request_id in (first, second):
        kinds = _kinds(events, request_id)
        assert kinds[0] == "SpeechStarted" and kinds[-1] == "SpeechCompleted"
        assert set(kinds[1:-1]) == {"AudioChunk"}
    assert [e.request_id for e in events if isinstance(e, SpeechCompleted)] == [first, second]


async def test_close_goes_out_only_after_the_last_completion(warm_server: str) -> None:
    transport = RecordingTransport(warm_server)
    session = await SpeechSession.connect(transport)
    first = await session.submit("First.")
    second = await session.submit("Second.")
    assert session.pending == {first: RequestState.QUEUED, second: RequestState.QUEUED}
    await session.close()
    assert session.pending == {}

    events = [event async for event in session.events()]
    assert [type(e).__name__ for e in events if not isinstance(e, AudioChunk)] == [
        "SpeechStarted",
        "SpeechCompleted",
        "SpeechStarted",
        "SpeechCompleted",
    ]
    last_completion = max(
        i
        for i, (direction, frame) in enumerate(transport.log)
        if direction == "received"
        and getattr(frame, "message", {}).get("type") == "synthesis_complete"
    )
    close_sent = transport.log.index(("sent", {"type": "close"}))
    assert close_sent > last_completion
    assert transport.log[-1] == ("received", None), "the server ends the session after close"
    with pytest.raises(RuntimeError):
        await session.submit("Too late.")


async def test_close_with_nothing_pending_is_immediate(warm_server: str) -> None:
    transport = RecordingTransport(warm_server)
    session = await SpeechSession.connect(transport)
    started = time.perf_counter()
    await session.close()
    # the server ends the session at once; a close that waited on nothing would spend its
    # whole close_timeout (10 s by default): half of it tells the two apart on any machine
    assert time.perf_counter() - started < 5.0
    assert transport.log[-1] == ("received", None), "the server, not the timeout, ended the session"
    assert transport.sent_types() == ["close"]
    assert [event async for event in session.events()] == []


async def test_cancel_drops_the_remaining_audio_and_the_session_goes_on(warm_server: str) -> None:
    transport = RecordingTransport(warm_server)
    long_text = " ".join(
        ["This sentence is one of many in a long answer nobody wants to hear."] * 4
    )
    async with await SpeechSession.connect(transport) as session:
        speaking = await session.submit(long_text)
        queued = await session.submit("Nor this one.")
        async for event in session.events():
            if isinstance(event, AudioChunk):
                break
        await session.cancel()
        after_cancel = await _until_finished(session, 2)

        assert not any(isinstance(e, AudioChunk) for e in after_cancel)
        assert [
            (type(e), e.request_id) for e in after_cancel if not isinstance(e, SpeechStarted)
        ] == [
            (SpeechCancelled, speaking),
            (SpeechCancelled, queued),
        ]
        server_final = {
            f["request_id"]: f["type"]
            for f in transport.control_frames()
            if f["type"] != "synthesis_start"
        }
        assert server_final == {speaking: "synthesis_cancelled", queued: "synthesis_cancelled"}
        assert {"type": "cancel"} in [m for d, m in transport.log if d == "sent"]

        after = await session.submit("Still here.")
        events = await _until_finished(session, 1)
    assert isinstance(events[-1], SpeechCompleted) and events[-1].request_id == after


async def test_unknown_voice_fails_that_request_and_the_session_goes_on(warm_server: str) -> None:
    async with await SpeechSession.connect(warm_server) as session:
        bad = await session.submit("Who am I?", voice="xx_nobody")
        good = await session.submit("Fine.")
        events = await _until_finished(session, 2)
    failed = [e for e in events if isinstance(e, SpeechFailed)]
    assert len(failed) == 1 and failed[0].request_id == bad and failed[0].index == 0
    error = failed[0].error
    assert isinstance(error, InvalidRequestError)
    assert (error.code, error.request_id) == ("unknown_voice", bad)
    assert error.message and "'" not in error.message[:1]
    assert _kinds(events, bad) == ["SpeechFailed"]
    assert _kinds(events, good)[-1] == "SpeechCompleted"


async def test_lost_connection_fails_pending_requests_and_raises(warm_server: str) -> None:
    async with CuttableProxy(warm_server) as proxy:
        session = await SpeechSession.connect(proxy.url)
        pending = await session.submit("Never finished.")
        proxy.cut()
        events: list[SpeechEvent] = []
        with pytest.raises(ConnectionLostError):
            async for event in session.events():
                events.append(event)
        failed = [e for e in events if isinstance(e, SpeechFailed)]
        assert [(e.request_id, type(e.error)) for e in failed] == [(pending, ConnectionLostError)]
        with pytest.raises(ConnectionLostError):
            await session.submit("Anyone?")
        await session.close()
    assert session.state is SessionState.CLOSED


async def test_server_closing_an_idle_session_is_a_lost_connection(
    make_speech_server: Callable[..., str],
) -> None:
    url = make_speech_server(idle_timeout_s=0.2)
    async with await SpeechSession.connect(url) as session:
        with pytest.raises(ConnectionLostError):
            async for _ in session.events():
                pass


async def test_a_full_server_refuses_the_session_as_busy(
    make_speech_server: Callable[..., str],
) -> None:
    url = make_speech_server(max_sessions=0)
    session = await SpeechSession.connect(url)
    events: list[SpeechEvent] = []
    with pytest.raises(SpeechBusyError):
        async for event in session.events():
            events.append(event)
    assert len(events) == 1 and isinstance(events[0], SpeechFailed)
    assert events[0].request_id is None and isinstance(events[0].error, SpeechBusyError)
    await session.close()


def test_sync_session_speaks_a_list_of_fragments(warm_server: str) -> None:
    with SyncSpeechSession.connect(warm_server) as session:
        events = list(session.speak(["Hello ", "there. ", "Bye."]))
        assert session.pending == {}
    assert session.state is SessionState.CLOSED
    (completed,) = [e for e in events if isinstance(e, SpeechCompleted)]
    assert completed.audio_bytes > 0


def test_sync_session_reads_a_blocking_source_without_stalling_audio(warm_server: str) -> None:
    """A synchronous source that blocks (a model thinking) is read in a worker thread, so
    the first sentence is heard while the source is still blocked: the source waits until
    that audio has arrived (bounded), which could never happen if reading it stalled the loop."""
    import threading

    heard = threading.Event()
    unblocked_by_audio: list[bool] = []

    def thinking_model() -> Iterator[str]:
        yield from ["Hello ", "there. ", "Then "]
        unblocked_by_audio.append(heard.wait(timeout=120))
        yield "bye."

    with SyncSpeechSession.connect(warm_server) as session:
        for event in session.speak(thinking_model()):
            if isinstance(event, AudioChunk):
                heard.set()
    assert unblocked_by_audio == [True]


async def test_word_times_arrive_as_events_before_the_audio_they_time(warm_server: str) -> None:
    """A session opened with `word_timestamps=True` gets `WordTimes` events, each before the
    audio it times, covering every word in order; one without sees none."""

    text = "Word times come first. Then the audio they time."
    async with await SpeechSession.connect(warm_server, word_timestamps=True) as session:
        await session.submit(text)
        events = await _until_finished(session, 1)
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("WordTimes") < kinds.index("AudioChunk")
    words = [w.word for e in events if isinstance(e, WordTimes) for w in e.words]
    assert words == text.split()
    async with await SpeechSession.connect(warm_server) as session:
        await session.submit(text)
        assert not [e for e in await _until_finished(session, 1) if isinstance(e, WordTimes)]
