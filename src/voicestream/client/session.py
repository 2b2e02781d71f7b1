"""A speech session over asyncio: many synthesis requests over one connection, answered as
typed events.

The session's logic (requests, their states, frames to events, what to send again on a new
connection) is `SessionProtocol`'s, which does no I/O; this shell moves its messages and
frames over a `Transport`. One background task reads the transport and hands the frames to
the protocol, so that requests finish (and `close` can wait for them) even while nobody
iterates. Callers read the events in arrival order through `events()` or, for text that is
still being written, `speak()`.

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
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable, Mapping
from enum import Enum
from typing import Any, Self

from voicestream.client.errors import (
    ConnectionLostError,
    SpeechBusyError,
    SpeechError,
)
from voicestream.client.events import AudioChunk, SpeechEvent
from voicestream.client.inbox import EventInbox
from voicestream.client.resume import ResumePolicy
from voicestream.client.session_protocol import (
    CLOSE_MESSAGE,
    FINAL_EVENTS,
    RequestState,
    SessionOptions,
    SessionProtocol,
    SessionState,
)
from voicestream.client.transport import Transport
from voicestream.client.websocket import WebSocketTransport
from voicestream.protocol import DEFAULT_SAMPLE_RATE, DEFAULT_VOICE, AudioFormat

__all__ = ["RequestState", "SessionState", "SpeechSession"]

RESPONSE_TIMEOUT_S = 60.0
MAX_UNREAD_AUDIO = 256


class _Signal(Enum):
    END = "end"
    """The session closed in order: every reader stops."""
    WAKE = "wake"
    """A `speak` sender finished: its reader re-checks whether it is done."""


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
        word_timestamps: bool = False,
    ) -> None:
        self.transport = transport
        self._protocol = SessionProtocol(
            SessionOptions(voice, speed, format, sample_rate, lang, word_timestamps)
        )
        self._close_timeout = close_timeout
        self._response_timeout = response_timeout
        self._resume = resume
        self.resumes = 0
        """Connections this session resumed on after one was lost."""
        self._inbox: EventInbox[SpeechEvent | SpeechError | _Signal] = EventInbox(
            max_unread_audio, is_audio=lambda item: isinstance(item, AudioChunk)
        )
        self._idle = asyncio.Event()
        self._idle.set()
        self._send_lock = asyncio.Lock()
        self._close_lock = asyncio.Lock()
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
        word_timestamps: bool = False,
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
            word_timestamps=word_timestamps,
        )

    @property
    def options(self) -> SessionOptions:
        """What applies to every request of the session (voice, speed, format, ...)."""
        return self._protocol.options

    @property
    def state(self) -> SessionState:
        return self._protocol.state

    @property
    def pending(self) -> dict[str, RequestState]:
        """The requests not finished yet, by id in submission order, with their state."""
        return self._protocol.pending

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        """Close in order; when leaving on an exception, cancel what is still pending first,
        since nobody is left to listen to it."""
        if exc_type is not None and self._protocol.failure is None:
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
        async with self._send_lock:
            message = self._protocol.submit(text, request_id, voice=voice, speed=speed)
            self._idle.clear()
            try:
                await self.transport.send(message)
            except SpeechError:
                self._protocol.unsubmit(message["request_id"])
                self._update_idle()
                raise
        return message["request_id"]

    async def submit_piece(
        self,
        text: str,
        request_id: str | None = None,
        *,
        more: bool = True,
        chunking: str = "latency",
        voice: str | None = None,
        speed: float | None = None,
    ) -> str:
        """Send one piece of a streamed utterance now and return its id (PROTOCOL.md 1.1,
        streamed text): without `request_id` (or with a new one) it opens an utterance; with
        the id of an open one it adds `text`; `more=False` ends it. Send the text raw, as it
        was written: the server cuts and normalizes it, and its word times carry the text's
        own spelling and offsets. The utterance is one request: its events follow."""
        async with self._send_lock:
            new = request_id is None or request_id not in self._protocol.pending
            message = self._protocol.submit_piece(
                text, request_id, more=more, chunking=chunking, voice=voice, speed=speed
            )
            self._idle.clear()
            try:
                await self.transport.send(message)
            except SpeechError:
                if new:
                    self._protocol.unsubmit(message["request_id"])
                self._update_idle()
                raise
        return message["request_id"]

    async def cancel(self, request_id: str | None = None) -> None:
        """Stop speaking `request_id`, or every pending request when None (barge-in).

        Audio of a cancelled request that arrived but was not yet read, or that is still on
        its way, is dropped here, so the silence starts at once; each cancelled request still
        ends with a `SpeechCancelled` event.
        """
        cancellation = self._protocol.cancel(request_id)
        if cancellation is None:
            return
        ended = cancellation.request_ids
        self._inbox.drop(lambda item: isinstance(item, AudioChunk) and item.request_id in ended)
        await self._send(cancellation.message)

    async def close(self) -> None:
        """Wait until every submitted request is finished, then close the session.

        `{"type":"close"}` goes out only after the last request's final frame, so that no
        server (including ones that close early) can cut a sentence short.
        """
        async with self._close_lock:
            if self.state is SessionState.CLOSED:
                return
            self._protocol.start_closing()
            self._inbox.unbound()  # nobody may be reading events any more: the reader must not wait
            await self._idle.wait()  # bounded: pending requests fail after response_timeout
            try:
                if self._protocol.failure is None:
                    with contextlib.suppress(SpeechError, TimeoutError):
                        await self._send(CLOSE_MESSAGE)
                        await asyncio.wait_for(asyncio.shield(self._reader), self._close_timeout)
            finally:
                if not self._reader.done():
                    self._reader.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await self._reader
                    self._inbox.put_nowait(_Signal.END)
                await self.transport.close()
                self._protocol.closed()

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
        """Speak text that is still being written, as it arrives: one streamed utterance.

        Each fragment is sent as it comes, raw, as a piece of one utterance (`submit_piece`),
        by a task of its own, while this iterator hands out the events of the session; the
        server cuts it (latency mode's short first chunk, then sentences) and speaks each
        chunk as soon as it is decided. It ends once the text is exhausted and the
        utterance is finished. A slow synchronous source blocks the event loop: pass an
        async iterable for one (`SyncSpeechSession.speak` does this for you).
        """
        submitted: set[str] = set()
        finished: set[str] = set()
        sender = asyncio.create_task(self._submit_pieces(text_fragments, submitted))
        sender.add_done_callback(lambda _: self._inbox.put_nowait(_Signal.WAKE))
        try:
            while not (sender.done() and submitted <= finished):
                event = await self._next_event()
                if event is None:
                    break
                if isinstance(event, FINAL_EVENTS) and event.request_id is not None:
                    finished.add(event.request_id)
                yield event
            sender.result()
        finally:
            if not sender.done():
                sender.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sender

    async def _submit_pieces(
        self, text_fragments: AsyncIterable[str] | Iterable[str], submitted: set[str]
    ) -> None:
        request_id: str | None = None
        async for fragment in _each(text_fragments):
            if fragment:
                request_id = await self.submit_piece(fragment, request_id)
                submitted.add(request_id)
        if request_id is not None:
            await self.submit_piece("", request_id, more=False)

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

    # --- the connection ------------------------------------------------------------------

    async def _send(self, message: Mapping[str, Any]) -> None:
        async with self._send_lock:
            if (failure := self._protocol.failure) is not None:
                raise failure
            await self.transport.send(message)

    def _deliver(self, events: list[SpeechEvent]) -> None:
        for event in events:
            self._inbox.put_nowait(event)
        self._update_idle()

    def _update_idle(self) -> None:
        if not self._protocol.pending:
            self._idle.set()

    async def _read_frames(self) -> None:
        while True:
            try:
                await self._read_connection()
                if (lost := self._protocol.end_of_stream()) is None:
                    self._inbox.put_nowait(_Signal.END)
                    return
            except SpeechError as error:
                lost = self._protocol.loss(error)
            except Exception as unexpected:  # noqa: BLE001 - a transport's own error must not hang readers
                lost = ConnectionLostError(f"the session broke: {unexpected!r}")
                lost.__cause__ = unexpected
                lost = self._protocol.loss(lost)
            if not await self._resumed():
                self._deliver(self._protocol.fail(lost))
                self._inbox.put_nowait(lost)
                return

    async def _read_connection(self) -> None:
        """Hand the frames of the current connection to the protocol until it ends (None)
        or breaks."""
        while True:
            await self._inbox.room()
            try:
                async with asyncio.timeout(self._response_timeout if self.pending else None):
                    frame = await self.transport.receive()
            except TimeoutError:
                raise ConnectionLostError(
                    f"the server sent nothing for {self._response_timeout:g} s while requests were pending"
                ) from None
            if frame is None:
                return
            self._deliver(self._protocol.receive(frame))

    async def _resumed(self) -> bool:
        """Reconnect and send again what was not received, under the resume policy; False
        when there is none, nothing is pending, or every attempt failed."""
        if self._resume is None or not self._protocol.resumable:
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
                    messages, ended = self._protocol.resend()
                    self._deliver(ended)
                    for message in messages:
                        await transport.send(message)
                except NotImplementedError:
                    return False
                except SpeechError:
                    continue
                self.resumes += 1
                return True
        return False


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
