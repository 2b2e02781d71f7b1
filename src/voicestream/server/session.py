"""The bidirectional session: many requests over one WebSocket, answered strictly in order.

Two tasks share the socket. The receiver reads messages (text or binary frames: SageMaker
forwards client payloads as binary), validates them and queues each accepted request with
the scheduler at once, so synthesis of later requests overlaps the sending of earlier
audio. The sender walks the requests in arrival order and writes each one's frames
(``synthesis_start``, audio, ``synthesis_complete``) without interleaving.

With ``pipelined=False`` (``voicestream serve --sequential``) the receiver reads the next
message only once everything before it was sent: the reference's strictly sequential
session, kept for comparison.

Session states: OPEN (reading and answering), CLOSING (``close`` received or idle: answering
what was accepted, reading no more), CLOSED.

Everything is bounded: at most ``max_session_requests`` accepted requests wait to be sent
(more are answered ``busy``), and at most ``MAX_PENDING_ERRORS`` error frames wait behind
them; a session that sends ``max_session_errors`` bad messages in a row, or whose unsent
error frames go past that bound, is closed with 1008 (policy violation), and so is one
that takes no frame for ``send_timeout_s``. The receiver never waits on the sender, so
pings are answered however slowly synthesis goes.

Once the session decides to close it reads nothing more: both tasks stop, every request it
holds is cancelled and the server forgets it at once; only then is the close frame sent,
within ``CLOSE_TIMEOUT_S`` (a client that reads nothing never takes it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from enum import Enum

from starlette.websockets import WebSocket, WebSocketDisconnect

from voicestream.protocol import (
    CancelRequest,
    CloseRequest,
    ErrorCode,
    ErrorFrame,
    ProtocolError,
    SynthesisCancelled,
    SynthesisComplete,
    SynthesizeRequest,
    parse_client_message,
)
from voicestream.server.job import Listener, SynthesisJob
from voicestream.server.requests import RequestRejected, SpeechService, SynthesisFailed


class SessionState(Enum):
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


@dataclass
class _Accepted:
    request: SynthesizeRequest
    job: SynthesisJob
    cancelled: bool = False
    """Set by ``cancel`` even when rendering already finished: audio not yet sent is dropped."""


_CLOSE = object()
MAX_PENDING_ERRORS = 4096
"""Error frames waiting to be sent, beyond which the session is closed with 1008."""
CLOSE_TIMEOUT_S = 5.0
"""How long the close frame may take to leave (a client that never reads blocks it)."""

log = logging.getLogger(__name__)


class _SendTimedOut(Exception):
    """A frame did not leave within ``send_timeout_s``: the session is being closed."""


class BidiSession:
    def __init__(self, websocket: WebSocket, service: SpeechService, listener: Listener) -> None:
        self.websocket = websocket
        self.service = service
        self.state = SessionState.OPEN
        self.listener = listener
        self._outbox: asyncio.Queue[_Accepted | ErrorFrame | object] = asyncio.Queue()
        """Bounded by construction: ``max_session_requests`` accepted requests, at most
        ``MAX_PENDING_ERRORS`` error frames and one close marker."""
        self._pending_errors = 0
        self._errors_in_a_row = 0
        self._accepted: list[_Accepted] = []
        self._last_activity = time.monotonic()
        self._close_now: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._sending = False
        self._sent = asyncio.Event()
        """Set by the sender after each item; the sequential mode waits on it."""

    @property
    def idle(self) -> bool:
        """Nothing accepted is waiting to be sent: going away now loses no audio."""
        return not self._accepted and self._outbox.empty() and not self._sending

    def go_away(self) -> None:
        """Close with 1001 now (the server is shutting down); unsent requests are dropped."""
        self._close_at_once(1001)

    def _close_at_once(self, code: int) -> None:
        """Decide to close: stop reading at once (the receiver checks the state)."""
        self.state = SessionState.CLOSING
        if not self._close_now.done():
            self._close_now.set_result(code)

    async def run(self) -> int | None:
        """Serve the session until close, disconnect, idle timeout or shutdown; return the
        close code to send (None: the client is gone). Everything the session holds is
        released before this returns; a sender that breaks gives 1011."""
        receiver = asyncio.create_task(self._receive_loop(), name="session-receiver")
        sender = asyncio.create_task(self._send_loop(), name="session-sender")
        try:
            return await self._outcome(receiver, sender, self._close_now)
        except WebSocketDisconnect:
            return None
        except Exception:
            log.exception("the session failed; closing it")
            return 1011
        finally:
            self.state = SessionState.CLOSED
            for task in (receiver, sender, self._close_now):
                task.cancel()
            await asyncio.gather(receiver, sender, return_exceptions=True)
            self._cancel_all()

    async def _outcome(self, receiver: asyncio.Task, sender: asyncio.Task, close_now: asyncio.Future[int]) -> int | None:
        """The close code the session ends with, once one of its tasks has ended."""
        done, _ = await asyncio.wait((receiver, sender, close_now), return_when=asyncio.FIRST_COMPLETED)
        if close_now in done:
            return close_now.result()
        if receiver in done:
            receiver.result()  # a client disconnect ends the session here
            if self.state is not SessionState.CLOSING:
                return None
            done, _ = await asyncio.wait((sender, close_now), return_when=asyncio.FIRST_COMPLETED)
            if close_now in done:
                return close_now.result()
        if sender.cancelled() or sender.exception() is None:
            return 1000
        if isinstance(sender.exception(), WebSocketDisconnect):
            return None
        log.error("the session's sender failed; closing the session", exc_info=sender.exception())
        return 1011

    # --- receiving ---------------------------------------------------------------------

    async def _receive_loop(self) -> None:
        while self.state is SessionState.OPEN:
            message = await self._receive_or_idle()
            if message is None:
                return
            await self._handle(message)
            if not self.service.settings.pipelined:
                await self._all_sent()

    async def _all_sent(self) -> None:
        """Sequential mode: read the next message only once everything before it was sent."""
        while not self.idle:
            self._sent.clear()
            await self._sent.wait()

    async def _receive_or_idle(self) -> str | bytes | None:
        """The next client payload; None once the session has been idle too long.

        Idle means no message received and no frame sent for ``idle_timeout_s``, and nothing
        accepted left to send: a slow reader still taking its audio is not idle.
        """
        idle_timeout_s = self.service.settings.idle_timeout_s
        while True:
            remaining = self._last_activity + idle_timeout_s - time.monotonic()
            if remaining <= 0:
                if self.idle:
                    self.state = SessionState.CLOSING
                    self._outbox.put_nowait(_CLOSE)
                    return None
                remaining = idle_timeout_s
            try:
                async with asyncio.timeout(remaining):
                    message = await self.websocket.receive()
            except TimeoutError:
                continue
            self._last_activity = time.monotonic()
            if message["type"] == "websocket.disconnect":
                raise WebSocketDisconnect(message.get("code", 1000))
            if message.get("text") is not None:
                return message["text"]
            return message.get("bytes") or b""

    async def _handle(self, payload: str | bytes) -> None:
        try:
            message = parse_client_message(payload)
        except ProtocolError as error:
            await self._reject(error.code, error.message, error.request_id)
            return
        if isinstance(message, CloseRequest):
            self.state = SessionState.CLOSING
            self._outbox.put_nowait(_CLOSE)
        elif isinstance(message, CancelRequest):
            self._cancel(message.request_id)
        else:
            await self._accept(message.ensure_request_id())

    async def _accept(self, request: SynthesizeRequest) -> None:
        limit = self.service.settings.max_session_requests
        if len(self._accepted) >= limit:
            await self._reject(
                ErrorCode.BUSY,
                f"This session already has {limit} requests waiting to be sent; read their audio first.",
                request.request_id,
            )
            return
        try:
            job = self.service.start(
                request.text, request.voice, request.speed, self.listener, request.request_id or "",
                route="websocket", format=request.format, sample_rate=request.sample_rate,
                language=request.lang,
            )
        except RequestRejected as rejected:
            await self._reject(rejected.code, rejected.message, request.request_id)
            return
        self._errors_in_a_row = 0
        accepted = _Accepted(request, job)
        self._accepted.append(accepted)
        self._outbox.put_nowait(accepted)

    async def _reject(self, code: ErrorCode | str, message: str, request_id: str | None) -> None:
        """Answer with an error frame, or close the session if it sent too many bad messages
        in a row or too many answers are still unsent (logged once: it reads no more)."""
        self._errors_in_a_row += 1
        if self._errors_in_a_row > self.service.settings.max_session_errors:
            log.warning("closing a session after %d bad messages in a row (1008)", self._errors_in_a_row - 1)
            self._close_at_once(1008)
            return
        if self._pending_errors >= MAX_PENDING_ERRORS:
            log.warning("closing a session with %d unread error frames (1008)", self._pending_errors)
            self._close_at_once(1008)
            return
        self.service.metrics.errors.labels(code=str(code)).inc()
        self._pending_errors += 1
        self._outbox.put_nowait(ErrorFrame(request_id=request_id, code=str(code), message=message))

    def _cancel(self, request_id: str | None) -> None:
        for accepted in self._accepted:
            if request_id is None or accepted.request.request_id == request_id:
                accepted.cancelled = True
                accepted.job.cancel()

    def _cancel_all(self) -> None:
        self._cancel(None)
        self._accepted.clear()

    # --- sending -----------------------------------------------------------------------

    async def _send_loop(self) -> None:
        while True:
            item = await self._outbox.get()
            if item is _CLOSE:
                return
            self._sending = True
            try:
                if isinstance(item, ErrorFrame):
                    self._pending_errors -= 1
                    await self._send(item.to_json())
                else:
                    assert isinstance(item, _Accepted)
                    await self._send_request(item)
            finally:
                self._sending = False
                if isinstance(item, _Accepted):
                    item.job.cancel()  # ends it if it did not end already: its slot is freed
                    with contextlib.suppress(ValueError):  # already dropped by _cancel_all
                        self._accepted.remove(item)
                self._sent.set()

    async def _send(self, frame: str | bytes) -> None:
        """Send one frame within ``send_timeout_s``, else decide to close the session (1008)."""
        timeout_s = self.service.settings.send_timeout_s
        try:
            async with asyncio.timeout(timeout_s):
                if isinstance(frame, bytes):
                    await self.websocket.send_bytes(frame)
                else:
                    await self.websocket.send_text(frame)
        except TimeoutError:
            log.warning("closing a session that took no frame for %g s (1008)", timeout_s)
            self._close_at_once(1008)
            raise _SendTimedOut from None
        self._last_activity = time.monotonic()

    async def _send_request(self, accepted: _Accepted) -> None:
        """One request's frames; any failure but a lost socket becomes its ``internal`` frame."""
        rid = accepted.request.request_id or ""
        code = ErrorCode.INTERNAL
        try:
            final = await self._speak(accepted, rid)
        except (WebSocketDisconnect, _SendTimedOut):
            raise
        except SynthesisFailed as failure:  # logged where it happened
            code, message = failure.code, failure.message
        except Exception:
            log.exception("sending a request failed", extra={"request_id": rid})
            message = "Synthesis failed for this request."
        else:
            await self._send(final.to_json())
            return
        accepted.job.cancel()
        self.service.metrics.errors.labels(code=code.value).inc()
        await self._send(ErrorFrame(request_id=rid, code=code, message=message).to_json())

    async def _speak(self, accepted: _Accepted, rid: str) -> SynthesisComplete | SynthesisCancelled:
        """Send the start frame and the audio; return the frame that ends the request."""
        if accepted.cancelled:
            return SynthesisCancelled(request_id=rid)
        stream = self.service.stream(accepted.job, route="websocket")
        await self._send(stream.start_frame(rid).to_json())
        async with contextlib.aclosing(aiter(stream)) as audio_chunks:
            async for audio in audio_chunks:
                if accepted.cancelled:
                    break
                await self._send(audio)
        if accepted.cancelled or stream.result is None:
            return SynthesisCancelled(request_id=rid)
        return stream.result.complete_frame(rid)


async def serve_session(websocket: WebSocket, service: SpeechService) -> None:
    """Serve an accepted WebSocket, or refuse it with ``busy`` beyond ``--max-sessions`` or
    while the server drains for shutdown. The server forgets the session (its slots, its
    requests) before the close frame is sent, which a client that reads nothing never takes."""
    listener = None if service.draining else service.admit_session()
    if listener is None:
        why = "is shutting down" if service.draining else "has too many open sessions"
        busy = ErrorFrame(code=ErrorCode.BUSY, message=f"The server {why}; try again shortly.")
        service.metrics.errors.labels(code=ErrorCode.BUSY.value).inc()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await websocket.send_text(busy.to_json())
                await websocket.close(code=1001 if service.draining else 1013)
        return
    session = BidiSession(websocket, service, listener)
    service.sessions.add(session)
    try:
        code = await session.run()
    finally:
        service.sessions.discard(session)
        service.release_session(listener)
    if code is not None:
        if code != 1000:
            service.metrics.sessions_closed.labels(code=str(code)).inc()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await websocket.close(code=code)
