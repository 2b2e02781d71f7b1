"""The bidirectional session: many requests over one WebSocket, answered strictly in order.

Two tasks share the socket. The receiver reads messages (text or binary frames: SageMaker
forwards client payloads as binary), validates them and queues each accepted request with
the scheduler at once, so synthesis of later requests overlaps the sending of earlier
audio. The sender walks the requests in arrival order and writes each one's frames
(``synthesis_start``, audio, ``synthesis_complete``) without interleaving.

Session states: OPEN (reading and answering), CLOSING (``close`` received: answering what
was accepted, reading no more), CLOSED.
"""

from __future__ import annotations

import asyncio
import contextlib
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
    SynthesizeRequest,
    parse_client_message,
)
from voicestream.server.requests import RequestRejected, SpeechService, SynthesisFailed
from voicestream.server.scheduler import Listener, SynthesisJob


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


class BidiSession:
    def __init__(self, websocket: WebSocket, service: SpeechService) -> None:
        self.websocket = websocket
        self.service = service
        self.state = SessionState.OPEN
        self.listener = Listener()
        self._outbox: asyncio.Queue[_Accepted | ErrorFrame | object] = asyncio.Queue()
        self._accepted: list[_Accepted] = []

    async def run(self) -> None:
        """Serve the session until close, disconnect or idle timeout; never leave work behind."""
        sender = asyncio.create_task(self._send_loop(), name="session-sender")
        try:
            await self._receive_loop()
            if self.state is SessionState.CLOSING:
                await sender
                await self.websocket.close(code=1000)
        except WebSocketDisconnect:
            pass
        finally:
            self.state = SessionState.CLOSED
            self._cancel_all()
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)

    # --- receiving ---------------------------------------------------------------------

    async def _receive_loop(self) -> None:
        while self.state is SessionState.OPEN:
            message = await self._receive_or_idle()
            if message is None:
                return
            await self._handle(message)

    async def _receive_or_idle(self) -> str | bytes | None:
        """The next client payload; None once the session has been idle too long."""
        while True:
            try:
                async with asyncio.timeout(self.service.settings.idle_timeout_s):
                    message = await self.websocket.receive()
            except TimeoutError:
                if self._busy():
                    continue
                self.state = SessionState.CLOSING
                self._outbox.put_nowait(_CLOSE)
                return None
            if message["type"] == "websocket.disconnect":
                raise WebSocketDisconnect(message.get("code", 1000))
            if message.get("text") is not None:
                return message["text"]
            return message.get("bytes") or b""

    def _busy(self) -> bool:
        return any(not a.job.finished for a in self._accepted) or not self._outbox.empty()

    async def _handle(self, payload: str | bytes) -> None:
        try:
            message = parse_client_message(payload)
        except ProtocolError as error:
            self._reject(error.code, error.message, error.request_id)
            return
        if isinstance(message, CloseRequest):
            self.state = SessionState.CLOSING
            self._outbox.put_nowait(_CLOSE)
        elif isinstance(message, CancelRequest):
            self._cancel(message.request_id)
        else:
            self._accept(message.ensure_request_id())

    def _accept(self, request: SynthesizeRequest) -> None:
        try:
            job = self.service.start(
                request.text, request.voice, request.speed, request.request_timestamp,
                self.listener, request.request_id or "", route="websocket",
            )
        except RequestRejected as rejected:
            self._reject(rejected.code, rejected.message, request.request_id)
            return
        accepted = _Accepted(request, job)
        self._accepted.append(accepted)
        self._outbox.put_nowait(accepted)

    def _reject(self, code: ErrorCode | str, message: str, request_id: str | None) -> None:
        self.service.metrics.errors.labels(code=str(code)).inc()
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
            if isinstance(item, ErrorFrame):
                await self.websocket.send_text(item.to_json())
            else:
                assert isinstance(item, _Accepted)
                await self._send_request(item)
                self._accepted.remove(item)

    async def _send_request(self, accepted: _Accepted) -> None:
        request, job = accepted.request, accepted.job
        rid = request.request_id or ""
        if accepted.cancelled:
            await self.websocket.send_text(SynthesisCancelled(request_id=rid).to_json())
            return
        stream = self.service.stream(job, request.format, request.sample_rate, route="websocket")
        try:
            await self.websocket.send_text(stream.start_frame(rid).to_json())
            async for audio in stream:
                if accepted.cancelled:
                    break
                await self.websocket.send_bytes(audio)
        except SynthesisFailed as failure:
            self.service.metrics.errors.labels(code=ErrorCode.INTERNAL.value).inc()
            frame = ErrorFrame(request_id=rid, code=ErrorCode.INTERNAL, message=str(failure))
            await self.websocket.send_text(frame.to_json())
            return
        if accepted.cancelled or stream.result is None:
            await self.websocket.send_text(SynthesisCancelled(request_id=rid).to_json())
        else:
            await self.websocket.send_text(stream.result.complete_frame(rid).to_json())


async def serve_session(websocket: WebSocket, service: SpeechService) -> None:
    """Serve an accepted WebSocket, or refuse it with ``busy`` beyond ``--max-sessions``."""
    if not service.admit_session():
        busy = ErrorFrame(code=ErrorCode.BUSY, message="The server has too many open sessions; try again shortly.")
        service.metrics.errors.labels(code=ErrorCode.BUSY.value).inc()
        with contextlib.suppress(Exception):
            await websocket.send_text(busy.to_json())
            await websocket.close(code=1013)
        return
    started = time.monotonic()
    try:
        await BidiSession(websocket, service).run()
    finally:
        service.release_session(time.monotonic() - started)
