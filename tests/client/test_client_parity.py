"""The sync and async shells of each client take the same parameters, and the sans-I/O cores
under them turn frames into events as the protocol says (no server: pure logic, driven
frame by frame, like the protocol layer's tests); one check on the real server shows that
the sync session passes every option on."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from voicestream.client import (
    AgentClient,
    AgentClientError,
    AgentEventReader,
    AsyncAgentClient,
    AsyncInvocationsClient,
    AudioChunk,
    AudioFrame,
    ConnectionLostError,
    ControlFrame,
    Frame,
    InvalidRequestError,
    InvocationsClient,
    InvocationsEventReader,
    RequestState,
    ServerError,
    SessionOptions,
    SessionProtocol,
    SessionState,
    SpeechBusyError,
    SpeechCancelled,
    SpeechCompleted,
    SpeechError,
    SpeechEvent,
    SpeechFailed,
    SpeechSession,
    SpeechStarted,
    SyncSpeechSession,
    WordTimes,
)
from voicestream.protocol import AudioEvent, encode_sse

# --- the shells have the same shape --------------------------------------------------------

SHELLS = [
    pytest.param(SpeechSession, SyncSpeechSession, "connect", {"call_timeout"}, id="session"),
    pytest.param(AsyncInvocationsClient, InvocationsClient, "__init__", set(), id="invocations"),
    pytest.param(AsyncAgentClient, AgentClient, "__init__", set(), id="agent"),
]
"""(async shell, sync shell, how each is made, parameters only the sync shell has)."""


def _public(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls) if not name.startswith("_")}


def _parameters(function: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    """(name, kind, default) of every parameter: annotations may differ (an
    `httpx.AsyncClient` where the sync shell takes an `httpx.Client`), nothing else may."""
    return [
        (p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()
    ]


@pytest.mark.parametrize(("async_shell", "sync_shell", "maker", "sync_only"), SHELLS)
def test_sync_and_async_shells_have_the_same_methods(
    async_shell: type, sync_shell: type, maker: str, sync_only: set[str]
) -> None:
    assert _public(async_shell) == _public(sync_shell)


@pytest.mark.parametrize(("async_shell", "sync_shell", "maker", "sync_only"), SHELLS)
def test_sync_and_async_shells_take_the_same_parameters(
    async_shell: type, sync_shell: type, maker: str, sync_only: set[str]
) -> None:
    methods = sorted(
        name
        for name in _public(async_shell) | {maker}
        if inspect.isfunction(inspect.getattr_static(async_shell, name))
        or isinstance(inspect.getattr_static(async_shell, name), classmethod)
    )
    assert maker in methods and len(methods) > 2
    for name in methods:
        sync_parameters = [
            p for p in _parameters(getattr(sync_shell, name)) if p[0] not in sync_only
        ]
        assert _parameters(getattr(async_shell, name)) == sync_parameters, name


def test_every_client_error_is_a_speech_error() -> None:
    """`AgentClientError` joined the one root, and still is what `except RuntimeError` caught."""
    error = AgentClientError("the agent is gone", code="connection_lost")
    assert isinstance(error, SpeechError) and isinstance(error, RuntimeError)
    assert (error.code, error.message) == ("connection_lost", "the agent is gone")
    assert AgentClientError("no code").code == "agent_unavailable"


# --- the session's core: frames in, events out ----------------------------------------------


def start(rid: str, format: str = "pcm16") -> ControlFrame:
    return ControlFrame(
        {"type": "synthesis_start", "request_id": rid, "format": format, "sample_rate": 24000}
    )


def complete(rid: str, audio_bytes: int) -> ControlFrame:
    return ControlFrame(
        {
            "type": "synthesis_complete", "request_id": rid, "audio_bytes": audio_bytes,
            "total_duration_s": audio_bytes / 48000, "elapsed_s": 0.5,
        }
    )


def cancelled(rid: str) -> ControlFrame:
    return ControlFrame({"type": "synthesis_cancelled", "request_id": rid})


def error(code: str, rid: str | None = None) -> ControlFrame:
    frame = {"type": "error", "code": code, "message": f"{code} happened"}
    return ControlFrame(frame if rid is None else frame | {"request_id": rid})


def words(rid: str, *spoken: str) -> ControlFrame:
    timed = [{"word": w, "start_s": i * 0.3, "end_s": i * 0.3 + 0.2} for i, w in enumerate(spoken)]
    return ControlFrame({"type": "word_timestamps", "request_id": rid, "words": timed})


def summary(event: SpeechEvent) -> tuple[Any, ...]:
    """An event as a short tuple that a table can spell out."""
    match event:
        case SpeechStarted():
            return ("started", event.request_id, event.index)
        case AudioChunk():
            return ("audio", event.request_id, event.data)
        case WordTimes():
            return ("words", event.request_id, tuple(w.word for w in event.words))
        case SpeechCompleted():
            return ("completed", event.request_id, event.audio_bytes, event.first_audio_ms)
        case SpeechCancelled():
            return ("cancelled", event.request_id)
        case SpeechFailed():
            return ("failed", event.request_id, type(event.error).__name__, event.error.code)
    raise AssertionError(event)


class Ticks:
    """A clock that moves one second per reading: first-audio times come out exact."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


Step = Frame | str
"""A frame from the server, or a verb of the caller: "cancel", "cancel r1", "resend"."""


@dataclass(frozen=True)
class Case:
    steps: list[Step]
    events: list[tuple[Any, ...]]
    pending: dict[str, RequestState]
    submit: tuple[str, ...] = ("r1",)
    format: str = "pcm16"
    word_timestamps: bool = False


CASES = {
    "one request, start to end": Case(
        [start("r1"), AudioFrame(b"ab"), AudioFrame(b"cd"), complete("r1", 4)],
        # clock: submitted at 1, first audio at 2
        [("started", "r1", 0), ("audio", "r1", b"ab"), ("audio", "r1", b"cd"),
         ("completed", "r1", 4, 1000.0)],
        {},
    ),
    "two requests keep their order and indexes": Case(
        [start("r1"), AudioFrame(b"a"), complete("r1", 1), start("r2"), AudioFrame(b"b")],
        # clock: r1 submitted at 1, r2 at 2, r1's first audio at 3
        [("started", "r1", 0), ("audio", "r1", b"a"), ("completed", "r1", 1, 2000.0),
         ("started", "r2", 1), ("audio", "r2", b"b")],
        {"r2": RequestState.SPEAKING},
        submit=("r1", "r2"),
    ),
    "a request's error fails it alone": Case(
        [error("unknown_voice", "r1"), start("r2")],
        [("failed", "r1", "InvalidRequestError", "unknown_voice"), ("started", "r2", 1)],
        {"r2": RequestState.SPEAKING},
        submit=("r1", "r2"),
    ),
    "a session's error belongs to no request": Case(
        [error("busy")],
        [("failed", None, "SpeechBusyError", "busy")],
        {"r1": RequestState.QUEUED},
    ),
    "frames of a newer server are skipped": Case(
        [ControlFrame({"type": "from_the_future"}), start("r1")],
        [("started", "r1", 0)],
        {"r1": RequestState.SPEAKING},
    ),
    "word times come when asked for": Case(
        [start("r1"), words("r1", "Hi", "there."), AudioFrame(b"ab")],
        [("started", "r1", 0), ("words", "r1", ("Hi", "there.")), ("audio", "r1", b"ab")],
        {"r1": RequestState.SPEAKING},
        word_timestamps=True,
    ),
    "a cancelled request's audio is dropped and it ends cancelled": Case(
        [start("r1"), AudioFrame(b"a"), "cancel", AudioFrame(b"b"), words("r1", "x"),
         complete("r1", 2), cancelled("r2")],
        [("started", "r1", 0), ("audio", "r1", b"a"), ("cancelled", "r1"), ("cancelled", "r2")],
        {},
        submit=("r1", "r2"),
    ),
    "cancelling one request leaves the other": Case(
        ["cancel r2", start("r1"), complete("r1", 0), cancelled("r2")],
        [("started", "r1", 0), ("completed", "r1", 0, None), ("cancelled", "r2")],
        {},
        submit=("r1", "r2"),
    ),
    "a resumed request skips what arrived and does not start twice": Case(
        [start("r1"), AudioFrame(b"abc"), "resend", start("r1"), AudioFrame(b"ab"),
         AudioFrame(b"cdef"), complete("r1", 6)],
        [("started", "r1", 0), ("audio", "r1", b"abc"), ("audio", "r1", b"def"),
         ("completed", "r1", 6, 1000.0)],
        {},
    ),
    "a container format cannot be resumed mid-answer": Case(
        [start("r1", "wav"), AudioFrame(b"RIFF"), "resend", start("r2", "wav")],
        [("started", "r1", 0), ("audio", "r1", b"RIFF"),
         ("failed", "r1", "ConnectionLostError", "connection_lost"), ("started", "r2", 1)],
        {"r2": RequestState.SPEAKING},
        submit=("r1", "r2"),
        format="wav",
    ),
    "a request being cancelled just ends on resume": Case(
        ["cancel", "resend"],
        [("cancelled", "r1")],
        {},
    ),
}


def _drive(case: Case) -> tuple[SessionProtocol, list[dict[str, Any]], list[SpeechEvent]]:
    """The protocol after `case`'s steps, with the messages it gave to send and its events."""
    protocol = SessionProtocol(
        SessionOptions(format=case.format, word_timestamps=case.word_timestamps),  # type: ignore[arg-type]
        clock=Ticks(),
        wall_clock=lambda: 1.5e9,
    )
    sent = [protocol.submit(f"Sentence {rid}.", rid) for rid in case.submit]
    events: list[SpeechEvent] = []
    for step in case.steps:
        if isinstance(step, str) and step.startswith("cancel"):
            cancellation = protocol.cancel(step.removeprefix("cancel").strip() or None)
            assert cancellation is not None
            sent.append(cancellation.message)
        elif step == "resend":
            messages, ended = protocol.resend()
            sent += messages
            events += ended
        else:
            assert not isinstance(step, str)
            events += protocol.receive(step)
    return protocol, sent, events


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_session_protocol_turns_frames_into_events(case: Case) -> None:
    protocol, _, events = _drive(case)
    assert [summary(event) for event in events] == case.events
    assert protocol.pending == case.pending


def test_session_protocol_writes_the_messages_to_send() -> None:
    protocol = SessionProtocol(
        SessionOptions(voice="bf_emma", speed=1.2, lang="en-gb", word_timestamps=True),
        wall_clock=lambda: 1.5e9,
    )
    assert protocol.submit("Hello.", "r1", speed=0.9) == {
        "type": "synthesize", "text": "Hello.", "request_id": "r1", "voice": "bf_emma",
        "speed": 0.9, "format": "pcm16", "sample_rate": 24000, "request_timestamp": 1.5e9,
        "lang": "en-gb", "word_timestamps": True,
    }
    plain = SessionProtocol().submit("Hi.", voice="am_adam")
    assert plain["voice"] == "am_adam" and plain["request_id"]
    assert "lang" not in plain and "word_timestamps" not in plain
    with pytest.raises(ValueError, match="already pending"):
        protocol.submit("Again.", "r1")
    cancellation = protocol.cancel()
    assert cancellation is not None
    assert (cancellation.message, cancellation.request_ids) == ({"type": "cancel"}, {"r1"})
    assert protocol.cancel() is None, "a request being cancelled is not cancelled twice"
    protocol.unsubmit("r1")
    assert protocol.pending == {}


def test_resend_sends_every_pending_request_again_in_order() -> None:
    _, sent, _ = _drive(CASES["a resumed request skips what arrived and does not start twice"])
    assert [m["type"] for m in sent] == ["synthesize", "synthesize"]
    assert sent[0] == sent[1]


@pytest.mark.parametrize(
    "frame",
    [
        AudioFrame(b"no request is speaking"),
        start("nobody"),
        complete("nobody", 0),
        ControlFrame({"type": "synthesis_start", "request_id": "r1"}),
    ],
    ids=["stray-audio", "unknown-start", "unknown-complete", "malformed"],
)
def test_frames_the_protocol_does_not_allow_are_server_errors(frame: Frame) -> None:
    protocol = SessionProtocol()
    protocol.submit("Hi.", "r1")
    with pytest.raises(ServerError) as raised:
        protocol.receive(frame)
    assert raised.value.code == "invalid_frame"


def test_how_a_connection_ends() -> None:
    protocol = SessionProtocol()
    lost = protocol.end_of_stream()
    assert isinstance(lost, ConnectionLostError), "an open session may not just end"
    protocol.receive(error("busy"))
    assert isinstance(protocol.end_of_stream(), SpeechBusyError), "the refusal is the reason"
    assert isinstance(protocol.loss(ConnectionLostError("cut")), SpeechBusyError)
    protocol.receive(ControlFrame({"type": "from_the_future"}))
    assert isinstance(protocol.loss(ConnectionLostError("cut")), ConnectionLostError)
    protocol.start_closing()
    assert protocol.end_of_stream() is None, "closing with nothing pending ends in order"
    with pytest.raises(RuntimeError, match="closing"):
        protocol.submit("Too late.")


def test_a_failed_session_fails_each_pending_request_with_its_own_error() -> None:
    protocol = SessionProtocol()
    for rid in ("r1", "r2"):
        protocol.submit("Hi.", rid)
    assert protocol.resumable
    failed = protocol.fail(ConnectionLostError("the line went dead"))
    assert [(e.request_id, e.error.request_id, e.error.message) for e in failed] == [  # type: ignore[union-attr]
        ("r1", "r1", "the line went dead"),
        ("r2", "r2", "the line went dead"),
    ]
    assert protocol.pending == {} and not protocol.resumable
    assert isinstance(protocol.failure, ConnectionLostError)
    with pytest.raises(ConnectionLostError):
        protocol.submit("Anyone?")
    assert protocol.state is SessionState.OPEN


# --- the HTTP clients' cores: bytes in, events out -------------------------------------------


def _split(body: bytes, size: int) -> Iterator[bytes]:
    """The body in pieces of `size` bytes: events cut anywhere must read the same."""
    for at in range(0, len(body), size):
        yield body[at : at + size]


INVOCATIONS_BODY = (
    encode_sse({"type": "synthesis_start", "request_id": "r", "format": "pcm16", "sample_rate": 24000})
    + encode_sse(AudioEvent.from_audio(0, b"\x01\x02"))
    + encode_sse({"type": "a_newer_event"})
    + encode_sse(AudioEvent.from_audio(1, b"\x03"))
    + encode_sse(complete("r", 3).message)
)


@pytest.mark.parametrize("size", [1, 7, len(INVOCATIONS_BODY)])
def test_invocations_reader_decodes_audio_then_the_completion(size: int) -> None:
    reader = InvocationsEventReader()
    items = [item for piece in _split(INVOCATIONS_BODY, size) for item in reader.feed(piece)]
    items += reader.finish()
    assert items[:2] == [b"\x01\x02", b"\x03"]
    assert items[2] == complete("r", 3).message and len(items) == 3


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (encode_sse(AudioEvent.from_audio(0, b"\x01")), ConnectionLostError),
        (encode_sse(error("text_too_long").message), InvalidRequestError),
        (b"data: not json\n\n", ServerError),
    ],
    ids=["no-completion", "error-event", "malformed"],
)
def test_invocations_reader_raises_what_the_answer_says(body: bytes, expected: type) -> None:
    reader = InvocationsEventReader()
    with pytest.raises(expected):
        reader.feed(body)
        reader.finish()


AGENT_PIECES = [
    (11.0, b'data: {"type":"agent_start","request_id":"r","t_ms":0,"mode":"bidi"}\n\n'),
    (12.0, b'data: {"type":"text_delta","request_id":"r",'),
    (13.0, b'"t_ms":1,"seq":0,"text":"Hi"}\n\ndata: {"type":"from_the_future","t_ms":1}\n\n'),
    (14.0, b'data: {"type":"agent_end","request_id":"r","t_ms":2}\n'),
]
"""(arrival, bytes): an event cut in two, one of a newer agent, and a last one that only the
end of the stream completes (no blank line after it)."""


def test_agent_reader_stamps_each_event_with_its_arrival() -> None:
    reader = AgentEventReader(started=10.0)
    received = [r for arrived, piece in AGENT_PIECES for r in reader.feed(piece, arrived)]
    received += reader.finish(20.0)
    assert [(r.event.type, r.at_ms) for r in received] == [
        ("agent_start", 1000.0), ("text_delta", 3000.0), ("agent_end", 10000.0)
    ]


def test_agent_reader_refuses_a_malformed_event() -> None:
    reader = AgentEventReader(started=0.0)
    with pytest.raises(AgentClientError, match="malformed") as raised:
        reader.feed(b'data: {"type":"text_delta","request_id":"r"}\n\n', 1.0)
    assert raised.value.code == "invalid_frame"


# --- the sync shell passes every option on (real server) -------------------------------------


def test_sync_session_takes_every_option_of_the_async_one(warm_server: str) -> None:
    """The options the sync shell once lacked reach the session: word times arrive."""
    with SyncSpeechSession.connect(
        warm_server, lang="en-us", response_timeout=30.0, max_unread_audio=4, word_timestamps=True
    ) as session:
        assert session.options == SessionOptions(lang="en-us", word_timestamps=True)
        events = list(session.speak(["Two words."]))
    assert [w.word for e in events if isinstance(e, WordTimes) for w in e.words] == ["Two", "words."]
    assert isinstance(events[-1], SpeechCompleted)
