"""A speech session: many synthesis requests over one connection, answered as typed events.

One background task reads the transport and turns frames into events, so that requests
finish (and `close` can wait for them) even while nobody iterates. Callers read the events
in arrival order through `events()` or, for text that is still being written, `speak()`.

Session states: OPEN (accepting requests), CLOSING (`close` called: waiting for what was
submitted, accepting nothing new), CLOSED. Request states: QUEUED (sent, no answer yet),
SPEAKING (its audio is arriving), CANCELLING (cancelled here: its audio is dropped until the
server's final frame for it). A request leaves the session with its last event.

Every wait is bounded: while requests are pending the server must send a frame at least
every `response_timeout` seconds, else the connection counts as lost; at most
`max_unread_audio` audio chunks wait for a reader, beyond which the session stops reading
the connection (the server then holds the rest, within its own budget). A connection lost
before the work is done is resumed under `resume` (`voicestream.client.resume`), else
every pending request fails with `ConnectionLostError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Self

from voicestream.client.errors import (
    ConnectionLostError,
    ServerError,
    SpeechBusyError,
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
)
from voicestream.client.inbox import EventInbox
from voicestream.client.resume import RESUMABLE_FORMATS, ResumePolicy
from voicestream.client.transport import AudioFrame, ControlFrame, Frame, Transport
from voicestream.client.websocket import WebSocketTransport
from voicestream.protocol import (
    DEFAULT_SAMPLE_RATE,
    DEFAULT_VOICE,
    AudioEvent,
    AudioFormat,
    ErrorFrame,
    ProtocolError,
    SynthesisCancelled,
    SynthesisComplete,
    SynthesisStart,
    new_request_id,
    parse_server_frame,
)
from voicestream.text import IncrementalSentenceChunker

_SESSION_FRAMES = frozenset(
    {"synthesis_start", "synthesis_complete", "synthesis_cancelled", "error"}
)
"""Frame types of the session; others come from a newer server and are skipped."""


_FINAL_EVENTS = (SpeechCompleted, SpeechCancelled, SpeechFailed)
"""The events that end a request: exactly one of them comes for each."""


class SessionState(Enum):
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


class RequestState(Enum):
    QUEUED = "queued"
    SPEAKING = "speaking"
    CANCELLING = "cancelling"


class _Signal(Enum):
    END = "end"
    """The session closed in order: every reader stops."""
    WAKE = "wake"
    """A `speak` sender finished: its reader re-checks whether it is done."""


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


RESPONSE_TIMEOUT_S = 60.0
MAX_UNREAD_AUDIO = 256


class SpeechSession:
    """One persistent session with a speech server, over any `Transport`.

    Make one with `await SpeechSession.connect(...)` and use it as an async context manager;
    `voice`, `speed`, `lang`, `format` and `sample_rate` apply to every request of the
    session (`lang` None: each voice speaks its own language).
    """

    def __init__(
        self,
        transport: Transport,
        *,
        voice: str,
        speed: float,
        format: AudioFormat,
        sample_rate: int,
        close_timeout: float,
        lang: str | None = None,
        response_timeout: float = RESPONSE_TIMEOUT_S,
        max_unread_audio: int = MAX_UNREAD_AUDIO,
        resume: ResumePolicy | None = None,
    ) -> None:
        self.transport = transport
        self.voice = voice
        self.speed = speed
        self.lang = lang
        self.format = format
        self.sample_rate = sample_rate
        self._close_timeout = close_timeout
        self._response_timeout = response_timeout
        self._resume = resume
        self.resumes = 0
        """Connections this session resumed on after one was lost."""
        self._state = SessionState.OPEN
        self._requests: dict[str, _Request] = {}
        self._submitted = 0
        self._speaking: _Request | None = None
        self._inbox: EventInbox[SpeechEvent | SpeechError | _Signal] = EventInbox(
            max_unread_audio, is_audio=lambda item: isinstance(item, AudioChunk)
        )
        self._idle = asyncio.Event()
        self._idle.set()
        self._send_lock = asyncio.Lock()
        self._close_lock = asyncio.Lock()
        self._failure: SpeechError | None = None
        self._session_error: SpeechError | None = None
        self._reader = asyncio.create_task(self._read_frames(), name="speech-session-reader")

    @classmethod
    async def connect(
        cls,
        transport: Transport | str,
        *,
        voice: str = DEFAULT_VOICE,
        speed: float = 1.0,
        format: AudioFormat = "pcm16",
        sample_rate: int = DEFAULT_SAMPLE_RATE,
        close_timeout: float = 10.0,
        lang: str | None = None,
        response_timeout: float = RESPONSE_TIMEOUT_S,
        max_unread_audio: int = MAX_UNREAD_AUDIO,
        resume: ResumePolicy | None = None,
        api_key: str | None = None,
    ) -> SpeechSession:
        """Connect `transport` (or a `WebSocketTransport` to the URL given, with `api_key`
        when the server has one) and start a session.

        `close_timeout` bounds how long `close` waits for the server to end the connection
        once everything is spoken; `response_timeout` how long pending requests may go
        without a frame from the server. With `resume`, a lost connection is reopened
        (`Transport.reopen`) and what was not received is asked for again; a first
        connection refused as ``busy`` is retried under the same policy.
        """
        if isinstance(transport, str):
            transport = WebSocketTransport(transport, api_key=api_key)
        await _connect_with_retries(transport, resume)
        return cls(
            transport,
            voice=voice,
            speed=speed,
            format=format,
            sample_rate=sample_rate,
            close_timeout=close_timeout,
            lang=lang,
            response_timeout=response_timeout,
            max_unread_audio=max_unread_audio,
            resume=resume,
        )

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def pending(self) -> dict[str, RequestState]:
        """The requests not finished yet, by id in submission order, with their state."""
        return {request_id: request.state for request_id, request in self._requests.items()}

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        """Close in order; when leaving on an exception, cancel what is still pending first,
        since nobody is left to listen to it."""
        if exc_type is not None and self._failure is None:
            with contextlib.suppress(SpeechError):
                await self.cancel()
        await self.close()

    # --- requests ------------------------------------------------------------------------

    async def submit(
        self,
        text: str,
        request_id: str | None = None,
        *,
        voice: str | None = None,
        speed: float | None = None,
    ) -> str:
        """Send one `synthesize` request now and return its id; its events follow.

        `voice` and `speed` override the session's for this request. The server validates
        the request: a bad one is reported as a `SpeechFailed` event, not raised here.
        """
        request_id = request_id or new_request_id()
        async with self._send_lock:
            self._ensure_open()
            if request_id in self._requests:
                raise ValueError(f"request {request_id!r} is already pending on this session")
            message: dict[str, Any] = {
                "type": "synthesize",
                "text": text,
                "request_id": request_id,
                "voice": voice or self.voice,
                "speed": self.speed if speed is None else speed,
                "format": self.format,
                "sample_rate": self.sample_rate,
                "request_timestamp": time.time(),
            }
            if self.lang is not None:
                message["lang"] = self.lang
            request = _Request(request_id, self._submitted, text, time.perf_counter(), message)
            self._submitted += 1
            self._requests[request_id] = request
            self._idle.clear()
            try:
                await self.transport.send(message)
            except SpeechError:
                self._forget(request)
                raise
        return request_id

    async def cancel(self, request_id: str | None = None) -> None:
        """Stop speaking `request_id`, or every pending request when None (barge-in).

        Audio of a cancelled request that arrived but was not yet read, or that is still on
        its way, is dropped here, so the silence starts at once; each cancelled request still
        ends with a `SpeechCancelled` event.
        """
        if request_id is None:
            targets = list(self._requests.values())
        else:
            targets = [self._requests[request_id]] if request_id in self._requests else []
        targets = [r for r in targets if r.state is not RequestState.CANCELLING]
        if not targets:
            return
        for request in targets:
            request.state = RequestState.CANCELLING
        self._drop_unread_audio({request.request_id for request in targets})
        message: dict[str, Any] = {"type": "cancel"}
        if request_id is not None:
            message["request_id"] = request_id
        await self._send(message)

    async def close(self) -> None:
        """Wait until every submitted request is finished, then close the session.

        `{"type":"close"}` goes out only after the last request's final frame, so that no
        server (including ones that close early) can cut a sentence short.
        """
        async with self._close_lock:
            if self._state is SessionState.CLOSED:
                return
            self._state = SessionState.CLOSING
            self._inbox.unbound()  # nobody may be reading events any more: the reader must not wait
            await self._idle.wait()  # bounded: pending requests fail after response_timeout
            try:
                if self._failure is None:
                    with contextlib.suppress(SpeechError, TimeoutError):
                        await self._send({"type": "close"})
                        await asyncio.wait_for(asyncio.shield(self._reader), self._close_timeout)
            finally:
                if not self._reader.done():
                    self._reader.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await self._reader
                    self._inbox.put_nowait(_Signal.END)
                await self.transport.close()
                self._state = SessionState.CLOSED

    # --- events --------------------------------------------------------------------------

    async def events(self) -> AsyncGenerator[SpeechEvent, None]:
        """Every event of the session in arrival order.

        Ends after `close` once every submitted request is finished; raises the session's
        failure (`ConnectionLostError` when the connection is lost) after the `SpeechFailed`
        events of the requests it took down. Use one reader at a time.
        """
        while (event := await self._next_event()) is not None:
            yield event

    async def speak(
        self, text_fragments: AsyncIterable[str] | Iterable[str]
    ) -> AsyncGenerator[SpeechEvent, None]:
        """Speak text that is still being written, sentence by sentence, as it arrives.

        Fragments go through an `IncrementalSentenceChunker`; each sentence is submitted the
        moment the chunker releases it, by a task of its own, while this iterator hands out
        the events of the session. It ends once the text is exhausted and the last sentence
        submitted is finished. A slow synchronous source blocks the event loop: pass an
        async iterable for one (`SyncSpeechSession.speak` does this for you).
        """
        submitted: set[str] = set()
        finished: set[str] = set()
        sender = asyncio.create_task(self._submit_sentences(text_fragments, submitted))
        sender.add_done_callback(lambda _: self._inbox.put_nowait(_Signal.WAKE))
        try:
            while not (sender.done() and submitted <= finished):
                event = await self._next_event()
                if event is None:
                    break
                if isinstance(event, _FINAL_EVENTS) and event.request_id is not None:
                    finished.add(event.request_id)
                yield event
            sender.result()
        finally:
            if not sender.done():
                sender.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sender

    async def _submit_sentences(
        self, text_fragments: AsyncIterable[str] | Iterable[str], submitted: set[str]
    ) -> None:
        chunker = IncrementalSentenceChunker()
        async for fragment in _each(text_fragments):
            for sentence in chunker.feed(fragment):
                submitted.add(await self.submit(sentence))
        if (rest := chunker.flush()) is not None:
            submitted.add(await self.submit(rest))

    async def _next_event(self) -> SpeechEvent | None:
        """The next event; None once the session closed; raises the session's failure.

        The end and the failure are put back, so that every later reader sees them too.
        """
        while True:
            item = await self._inbox.get()
            if item is _Signal.WAKE:
                continue
            if item is _Signal.END:
                self._inbox.put_nowait(item)
                return None
            if isinstance(item, SpeechError):
                self._inbox.put_nowait(item)
                raise item
            return item

    # --- internals -----------------------------------------------------------------------

    def _drop_unread_audio(self, request_ids: set[str]) -> None:
        """Take the audio of these requests out of the events not yet handed out: after a
        barge-in, no reader should play another word of them."""
        self._inbox.drop(lambda item: isinstance(item, AudioChunk) and item.request_id in request_ids)

    def _ensure_open(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._state is not SessionState.OPEN:
            raise RuntimeError(f"the session is {self._state.value}; no new requests")

    async def _send(self, message: Mapping[str, Any]) -> None:
        async with self._send_lock:
            if self._failure is not None:
                raise self._failure
            await self.transport.send(message)

    async def _read_frames(self) -> None:
        while True:
            try:
                await self._read_connection()
                if not (self._requests or self._state is SessionState.OPEN):
                    self._inbox.put_nowait(_Signal.END)
                    return
                lost: SpeechError = ConnectionLostError("the server ended the session before it was closed")
            except SpeechError as error:
                lost = error
            except Exception as unexpected:  # noqa: BLE001 - a transport's own error must not hang readers
                lost = ConnectionLostError(f"the session broke: {unexpected!r}")
                lost.__cause__ = unexpected
            lost = self._session_error or lost
            if not await self._resumed(lost):
                self._fail(lost)
                return

    async def _read_connection(self) -> None:
        """Hand out the frames of the current connection until it ends (None) or breaks."""
        while True:
            await self._inbox.room()
            try:
                async with asyncio.timeout(self._response_timeout if self._requests else None):
                    frame = await self.transport.receive()
            except TimeoutError:
                raise ConnectionLostError(
                    f"the server sent nothing for {self._response_timeout:g} s while requests were pending"
                ) from None
            if frame is None:
                return
            self._on_frame(frame)

    async def _resumed(self, lost: SpeechError) -> bool:
        """Reconnect and send again what was not received, under the resume policy; False
        when there is none, the session is closing with nothing pending, or every attempt failed."""
        if self._resume is None or self._failure is not None or not self._requests:
            return False
        async with self._send_lock:
            with contextlib.suppress(Exception):
                await self.transport.close()
            for delay, url in self._resume.schedule():
                await asyncio.sleep(delay)
                try:
                    transport = self.transport.reopen(url)
                    await transport.connect()
                    self.transport = transport
                    self._session_error = None
                    await self._send_again()
                except NotImplementedError:
                    return False
                except SpeechError:
                    continue
                self.resumes += 1
                return True
        return False

    async def _send_again(self) -> None:
        """On a new connection: every pending request again, in order; one whose audio partly
        arrived skips what arrived (raw formats only), one being cancelled just ends."""
        self._speaking = None
        for request in list(self._requests.values()):
            if request.state is RequestState.CANCELLING:
                self._finish(request, SpeechCancelled(request.request_id, request.index))
                continue
            if request.received_bytes and request.message["format"] not in RESUMABLE_FORMATS:
                failure = ConnectionLostError(
                    f"the connection was lost mid-answer and {request.message['format']} audio cannot "
                    "be resumed at an offset", request_id=request.request_id,
                )
                self._finish(request, SpeechFailed(request.request_id, request.index, failure))
                continue
            request.skip_bytes = request.received_bytes
            request.state = RequestState.QUEUED
            await self.transport.send(request.message)

    def _fail(self, error: SpeechError) -> None:
        """Fail every pending request with the error that ended the session, then the session.

        A session-level error frame just before the end (a `busy` refusal) is the reason the
        connection ended, so it is what callers get rather than a bare connection loss.
        """
        self._failure = error
        for request in list(self._requests.values()):
            failure = type(error)(error.message, code=error.code, request_id=request.request_id)
            self._finish(request, SpeechFailed(request.request_id, request.index, failure))
        self._inbox.put_nowait(error)

    def _on_frame(self, frame: Frame) -> None:
        self._session_error = None
        match frame:
            case AudioFrame(data=data):
                self._on_audio(data)
            case ControlFrame(message=message):
                self._on_control(message)

    def _on_audio(self, data: bytes) -> None:
        request = self._speaking
        if request is None:
            raise ServerError("the server sent audio outside of any request", code="invalid_frame")
        if request.state is RequestState.CANCELLING:
            return
        if request.skip_bytes:  # resumed: this much was received on the lost connection
            skipped = min(request.skip_bytes, len(data))
            request.skip_bytes -= skipped
            data = data[skipped:]
            if not data:
                return
        if request.first_audio_at is None:
            request.first_audio_at = time.perf_counter()
        request.received_bytes += len(data)
        self._inbox.put_nowait(AudioChunk(request.request_id, request.index, data))

    def _on_control(self, message: dict[str, Any]) -> None:
        if message.get("type") not in _SESSION_FRAMES:
            return
        try:
            frame = parse_server_frame(message)
        except ProtocolError as error:
            raise ServerError(
                f"the server sent a malformed frame: {error.message}", code="invalid_frame"
            ) from None
        match frame:
            case SynthesisStart():
                request = self._pending(frame.request_id)
                if request.state is RequestState.QUEUED:
                    request.state = RequestState.SPEAKING
                self._speaking = request
                if request.started:
                    return
                request.started = True
                self._inbox.put_nowait(
                    SpeechStarted(
                        request.request_id,
                        request.index,
                        request.text,
                        frame.format,
                        frame.sample_rate,
                    )
                )
            case SynthesisComplete():
                request = self._pending(frame.request_id)
                if request.state is RequestState.CANCELLING:
                    self._finish(request, SpeechCancelled(request.request_id, request.index))
                else:
                    self._finish(request, self._completed(request, frame))
            case SynthesisCancelled():
                request = self._pending(frame.request_id)
                self._finish(request, SpeechCancelled(request.request_id, request.index))
            case ErrorFrame():
                self._on_error(frame)
            case AudioEvent():
                raise ServerError(
                    "the server sent an SSE audio event on a session", code="invalid_frame"
                )

    def _on_error(self, frame: ErrorFrame) -> None:
        error = error_from_frame(frame.code, frame.message, frame.request_id)
        request = self._requests.get(frame.request_id) if frame.request_id is not None else None
        if request is None:
            self._inbox.put_nowait(SpeechFailed(frame.request_id, None, error))
            self._session_error = error
        else:
            self._finish(request, SpeechFailed(request.request_id, request.index, error))

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

    def _finish(self, request: _Request, event: SpeechEvent) -> None:
        self._forget(request)
        self._inbox.put_nowait(event)

    def _forget(self, request: _Request) -> None:
        del self._requests[request.request_id]
        if self._speaking is request:
            self._speaking = None
        if not self._requests:
            self._idle.set()


async def _each(fragments: AsyncIterable[str] | Iterable[str]) -> AsyncIterator[str]:
    if isinstance(fragments, AsyncIterable):
        async for fragment in fragments:
            yield fragment
    else:
        for fragment in fragments:
            yield fragment


async def _connect_with_retries(transport: Transport, resume: ResumePolicy | None) -> None:
    """Connect, retrying a ``busy`` refusal or a failed connection under ``resume``."""
    if resume is None:
        await transport.connect()
        return
    failure: SpeechError | None = None
    for delay, _ in resume.schedule():
        try:
            await transport.connect()
            return
        except (SpeechBusyError, ConnectionLostError) as error:
            failure = error
            await asyncio.sleep(delay)
    assert failure is not None
    raise failure
