"""The speech session without I/O: the caller's verbs and the server's frames in, the
messages to send and `SpeechEvent`s out (in the manner of h11 and wyoming).

`SessionProtocol` is everything a session knows: its options, its requests and their
states, which request the server is speaking, how much of each one's audio arrived (to
resume it). It touches no socket and no event loop, so the asyncio shell
(`SpeechSession`) and the sync one (`SyncSpeechSession`, which drives it) cannot drift, and
tests can drive it frame by frame.

Session states: OPEN (accepting requests), CLOSING (waiting for what was submitted,
accepting nothing new), CLOSED. Request states: QUEUED (sent, no answer yet), SPEAKING (its
audio is arriving), CANCELLING (cancelled here: its audio is dropped until the server's final
frame for it). A request leaves the session with its last event.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from voicestream.client.errors import (
    ConnectionLostError,
    ServerError,
    SpeechError,
    error_from_frame,
)
from voicestream.client.events import (
    AudioChunk,
    SpeechCancelled,
    SpeechCompleted,
    SpeechEvent,
    SpeechFailed,
    SpeechStarted,
    WordTimes,
)
from voicestream.client.resume import RESUMABLE_FORMATS
from voicestream.client.transport import AudioFrame, ControlFrame, Frame
from voicestream.protocol import (
    DEFAULT_SAMPLE_RATE,
    DEFAULT_VOICE,
    AudioFormat,
    ErrorFrame,
    ProtocolError,
    SynthesisCancelled,
    SynthesisComplete,
    SynthesisStart,
    WordTimestamps,
    new_request_id,
    parse_server_frame,
)

SESSION_FRAMES = frozenset(
    {"synthesis_start", "synthesis_complete", "synthesis_cancelled", "error", "word_timestamps"}
)
"""Frame types of the session; others come from a newer server and are skipped."""

FINAL_EVENTS = (SpeechCompleted, SpeechCancelled, SpeechFailed)
"""The events that end a request: exactly one of them comes for each."""

CLOSE_MESSAGE: dict[str, Any] = {"type": "close"}


class SessionState(Enum):
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


class RequestState(Enum):
    QUEUED = "queued"
    SPEAKING = "speaking"
    CANCELLING = "cancelling"


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """What applies to every request of a session (`lang` None: each voice speaks its own
    language; `word_timestamps`: `WordTimes` events before the audio they time)."""

    voice: str = DEFAULT_VOICE
    speed: float = 1.0
    format: AudioFormat = "pcm16"
    sample_rate: int = DEFAULT_SAMPLE_RATE
    lang: str | None = None
    word_timestamps: bool = False


@dataclass(frozen=True, slots=True)
class Cancellation:
    """A `cancel` to send, and the requests it ends (whose unread audio is to be dropped)."""

    message: dict[str, Any]
    request_ids: frozenset[str]


@dataclass(eq=False)
class _Request:
    request_id: str
    index: int
    text: str
    submitted_at: float
    message: dict[str, Any]
    """What was sent, to send again on a resumed connection."""
    state: RequestState = RequestState.QUEUED
    first_audio_at: float | None = None
    started: bool = False
    """`SpeechStarted` was handed out (a resumed request does not start twice)."""
    received_bytes: int = 0
    skip_bytes: int = 0
    """Audio of a resumed request already received on the lost connection: dropped again."""
    open_for_text: bool = False
    """A streamed utterance whose last piece was not sent yet (`submit_piece`)."""


class SessionProtocol:
    """The state machine of one session (PROTOCOL.md 1.1), whatever carries its frames.

    `clock` stamps submissions and first audio (for `SpeechCompleted.first_audio_ms`),
    `wall_clock` the `request_timestamp` of each request; tests may pass their own.
    """

    def __init__(
        self,
        options: SessionOptions | None = None,
        *,
        clock: Callable[[], float] = time.perf_counter,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.options = options or SessionOptions()
        self._clock = clock
        self._wall_clock = wall_clock
        self._state = SessionState.OPEN
        self._requests: dict[str, _Request] = {}
        self._submitted = 0
        self._speaking: _Request | None = None
        self._failure: SpeechError | None = None
        self._session_error: SpeechError | None = None

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def pending(self) -> dict[str, RequestState]:
        """The requests not finished yet, by id in submission order, with their state."""
        return {request_id: request.state for request_id, request in self._requests.items()}

    @property
    def failure(self) -> SpeechError | None:
        """What ended the session, once it failed."""
        return self._failure

    @property
    def resumable(self) -> bool:
        """Whether a lost connection leaves anything to ask for again."""
        return self._failure is None and bool(self._requests)

    # --- the caller's verbs --------------------------------------------------------------

    def submit(
        self,
        text: str,
        request_id: str | None = None,
        *,
        voice: str | None = None,
        speed: float | None = None,
    ) -> dict[str, Any]:
        """Take a request and return its `synthesize` message (its id in ``request_id``)."""
        self._ensure_open()
        request_id = request_id or new_request_id()
        if request_id in self._requests:
            raise ValueError(f"request {request_id!r} is already pending on this session")
        options = self.options
        message: dict[str, Any] = {
            "type": "synthesize",
            "text": text,
            "request_id": request_id,
            "voice": voice or options.voice,
            "speed": options.speed if speed is None else speed,
            "format": options.format,
            "sample_rate": options.sample_rate,
            "request_timestamp": self._wall_clock(),
        }
        if options.lang is not None:
            message["lang"] = options.lang
        if options.word_timestamps:  # only when asked: other messages stay the original sample's
            message["word_timestamps"] = True
        self._requests[request_id] = _Request(
            request_id, self._submitted, text, self._clock(), message
        )
        self._submitted += 1
        return message

    def submit_piece(
        self,
        text: str,
        request_id: str | None = None,
        *,
        more: bool = True,
        chunking: str = "latency",
        voice: str | None = None,
        speed: float | None = None,
    ) -> dict[str, Any]:
        """Take one piece of a streamed utterance and return its message (PROTOCOL.md 1.1,
        streamed text): the first piece opens it (with the session's options, ``voice``,
        ``speed`` and ``chunking``), later ones with its id add text, ``more=False`` ends it.
        The text goes as it is: the server cuts and normalizes it. Pieces of an open
        utterance are taken while the session closes (`close` waits for it to end)."""
        request = self._requests.get(request_id) if request_id is not None else None
        if request is None:
            message = self.submit(text, request_id, voice=voice, speed=speed)
            request = self._requests[message["request_id"]]
            message["continue"] = more
            if chunking != "latency":
                message["chunking"] = chunking
            request.open_for_text = more
            return dict(message)
        if self._failure is not None:
            raise self._failure
        if not request.open_for_text:
            raise ValueError(f"request {request.request_id!r} takes no more text")
        request.text += text
        request.message["text"] += text  # a resumed connection sends the text so far at once
        request.message["continue"] = request.open_for_text = more
        return {"type": "synthesize", "request_id": request.request_id, "text": text, "continue": more}

    def unsubmit(self, request_id: str) -> None:
        """Forget a request whose message could not be sent; nothing if it already ended."""
        if (request := self._requests.get(request_id)) is not None:
            self._forget(request)

    def cancel(self, request_id: str | None = None) -> Cancellation | None:
        """Cancel `request_id`, or every pending request when None; None when there is
        nothing (left) to cancel. Each one still ends with a `SpeechCancelled` event."""
        if request_id is None:
            targets = list(self._requests.values())
        else:
            targets = [self._requests[request_id]] if request_id in self._requests else []
        targets = [r for r in targets if r.state is not RequestState.CANCELLING]
        if not targets:
            return None
        for request in targets:
            request.state = RequestState.CANCELLING
        message: dict[str, Any] = {"type": "cancel"}
        if request_id is not None:
            message["request_id"] = request_id
        return Cancellation(message, frozenset(r.request_id for r in targets))

    def start_closing(self) -> None:
        """Accept nothing new; `close` is to be sent once `pending` is empty."""
        if self._state is SessionState.OPEN:
            self._state = SessionState.CLOSING

    def closed(self) -> None:
        self._state = SessionState.CLOSED

    # --- the connection ------------------------------------------------------------------

    def receive(self, frame: Frame) -> list[SpeechEvent]:
        """The events one frame of the server makes; raises `ServerError` for a frame the
        protocol does not allow there (the connection is then as good as lost)."""
        self._session_error = None
        match frame:
            case AudioFrame(data=data):
                return self._on_audio(data)
            case ControlFrame(message=message):
                return self._on_control(message)
        return []

    def end_of_stream(self) -> SpeechError | None:
        """The server ended the stream in order: None when that ends the session as it
        should (closing, nothing pending), else the loss to resume from or fail with."""
        if not (self._requests or self._state is SessionState.OPEN):
            return None
        return self.loss(ConnectionLostError("the server ended the session before it was closed"))

    def loss(self, error: SpeechError) -> SpeechError:
        """Why the connection was lost: a session-level error frame just before the end (a
        `busy` refusal) is the reason, rather than the bare loss."""
        return self._session_error or error

    def resend(self) -> tuple[list[dict[str, Any]], list[SpeechEvent]]:
        """On a new connection: the messages of every pending request again, in order, and
        the events of those that end here instead. One whose audio partly arrived skips what
        arrived (raw formats only; others fail), one being cancelled just ends."""
        self._speaking = None
        self._session_error = None
        messages: list[dict[str, Any]] = []
        events: list[SpeechEvent] = []
        for request in list(self._requests.values()):
            audio_format = request.message["format"]
            if request.state is RequestState.CANCELLING:
                events.append(self._finish(request, SpeechCancelled(request.request_id, request.index)))
            elif request.received_bytes and audio_format not in RESUMABLE_FORMATS:
                failure = ConnectionLostError(
                    f"the connection was lost mid-answer and {audio_format} audio cannot "
                    "be resumed at an offset", request_id=request.request_id,
                )
                events.append(self._finish(request, SpeechFailed(request.request_id, request.index, failure)))
            else:
                request.skip_bytes = request.received_bytes
                request.state = RequestState.QUEUED
                messages.append(request.message)
        return messages, events

    def fail(self, error: SpeechError) -> list[SpeechEvent]:
        """The session is over with `error`: every pending request fails with it."""
        self._failure = error
        return [
            self._finish(
                request,
                SpeechFailed(
                    request.request_id,
                    request.index,
                    type(error)(error.message, code=error.code, request_id=request.request_id),
                ),
            )
            for request in list(self._requests.values())
        ]

    # --- frames --------------------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._state is not SessionState.OPEN:
            raise RuntimeError(f"the session is {self._state.value}; no new requests")

    def _on_audio(self, data: bytes) -> list[SpeechEvent]:
        request = self._speaking
        if request is None:
            raise ServerError("the server sent audio outside of any request", code="invalid_frame")
        if request.state is RequestState.CANCELLING:
            return []
        if request.skip_bytes:  # resumed: this much was received on the lost connection
            skipped = min(request.skip_bytes, len(data))
            request.skip_bytes -= skipped
            data = data[skipped:]
            if not data:
                return []
        if request.first_audio_at is None:
            request.first_audio_at = self._clock()
        request.received_bytes += len(data)
        return [AudioChunk(request.request_id, request.index, data)]

    def _on_control(self, message: dict[str, Any]) -> list[SpeechEvent]:
        if message.get("type") not in SESSION_FRAMES:
            return []
        try:
            frame = parse_server_frame(message)
        except ProtocolError as error:
            raise ServerError(
                f"the server sent a malformed frame: {error.message}", code="invalid_frame"
            ) from None
        match frame:
            case SynthesisStart():
                return self._on_start(frame)
            case SynthesisComplete():
                request = self._pending(frame.request_id)
                if request.state is RequestState.CANCELLING:
                    return [self._finish(request, SpeechCancelled(request.request_id, request.index))]
                return [self._finish(request, self._completed(request, frame))]
            case SynthesisCancelled():
                request = self._pending(frame.request_id)
                return [self._finish(request, SpeechCancelled(request.request_id, request.index))]
            case ErrorFrame():
                return [self._on_error(frame)]
            case WordTimestamps():
                request = self._pending(frame.request_id)
                if request.state is RequestState.CANCELLING or request.skip_bytes:
                    return []
                return [WordTimes(request.request_id, request.index, frame.words)]
        return []

    def _on_start(self, frame: SynthesisStart) -> list[SpeechEvent]:
        request = self._pending(frame.request_id)
        if request.state is RequestState.QUEUED:
            request.state = RequestState.SPEAKING
        self._speaking = request
        if request.started:
            return []
        request.started = True
        return [
            SpeechStarted(
                request.request_id, request.index, request.text, frame.format, frame.sample_rate
            )
        ]

    def _on_error(self, frame: ErrorFrame) -> SpeechEvent:
        error = error_from_frame(frame.code, frame.message, frame.request_id)
        request = self._requests.get(frame.request_id) if frame.request_id is not None else None
        if request is None:
            self._session_error = error
            return SpeechFailed(frame.request_id, None, error)
        return self._finish(request, SpeechFailed(request.request_id, request.index, error))

    def _pending(self, request_id: str) -> _Request:
        request = self._requests.get(request_id)
        if request is None:
            raise ServerError(
                f"the server answered request {request_id!r}, which is not pending",
                code="invalid_frame",
            )
        return request

    @staticmethod
    def _completed(request: _Request, frame: SynthesisComplete) -> SpeechCompleted:
        first_audio_ms = None
        if request.first_audio_at is not None:
            first_audio_ms = (request.first_audio_at - request.submitted_at) * 1000
        return SpeechCompleted(
            request.request_id,
            request.index,
            frame.audio_bytes,
            frame.total_duration_s,
            frame.elapsed_s,
            first_audio_ms,
        )

    def _finish(self, request: _Request, event: SpeechEvent) -> SpeechEvent:
        self._forget(request)
        return event

    def _forget(self, request: _Request) -> None:
        self._requests.pop(request.request_id, None)
        if self._speaking is request:
            self._speaking = None
