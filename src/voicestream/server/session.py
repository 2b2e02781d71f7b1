"""The bidirectional session: many requests over one WebSocket, answered strictly in order.

Two tasks share the socket. The receiver reads messages (text or binary frames: SageMaker
forwards client payloads as binary), validates them and queues each accepted request with
the scheduler at once, so synthesis of later requests overlaps the sending of earlier
audio. The sender walks the requests in arrival order and writes each one's frames
(``synthesis_start``, audio, ``synthesis_complete``) without interleaving.

With ``pipelined=False`` (``voicestream serve --sequential``) the receiver reads the next
message only once everything before it was sent: the reference's strictly sequential
session, kept for comparison.

The edge (admission, states, the send timeout, the idle clock, the error budget, going
away) is the one :class:`~voicestream.server.connection.Connection` every face shares; this
module only parses the session's messages and formats its frames. At most
``max_session_requests`` accepted requests wait to be sent (more are answered ``busy``).
The receiver never waits on the sender, so pings are answered however slowly synthesis goes.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

from starlette.websockets import WebSocket

from voicestream.protocol import (
    CancelRequest,
    CloseRequest,
    ErrorCode,
    SpeechFault,
    SynthesisCancelled,
    SynthesisComplete,
    SynthesizeRequest,
    WordTimestamps,
    fault_frame,
    parse_client_message,
)
from voicestream.server.connection import (
    Connection,
    PeerGone,
    SendTimedOut,
    Transport,
    WebSocketTransport,
    busy,
)
from voicestream.server.job import Listener, SynthesisJob
from voicestream.server.requests import SpeechService

log = logging.getLogger(__name__)


@dataclass
class _Accepted:
    request: SynthesizeRequest
    job: SynthesisJob
    cancelled: bool = False
    """Set by ``cancel`` even when rendering already finished: audio not yet sent is dropped."""


class BidiSession(Connection):
    kind = "session"

    def __init__(self, transport: Transport, service: SpeechService, listener: Listener) -> None:
        super().__init__(transport, service, listener)
        self._accepted: list[_Accepted] = []

    @property
    def has_unsent(self) -> bool:
        return bool(self._accepted)

    @classmethod
    def fault_frame(cls, fault: SpeechFault) -> str:
        return fault_frame(fault).to_json()

    async def handle(self, payload: str | bytes) -> None:
        message = parse_client_message(payload)
        if isinstance(message, CloseRequest):
            self.finish()
        elif isinstance(message, CancelRequest):
            self._cancel(message.request_id)
        else:
            self._accept(message.ensure_request_id())
        if not self.service.settings.pipelined:
            await self.wait_all_sent()

    def _accept(self, request: SynthesizeRequest) -> None:
        limit = self.service.settings.max_session_requests
        if len(self._accepted) >= limit:
            raise busy(f"This session already has {limit} requests waiting to be sent; read their audio first.",
                       request.request_id)
        try:
            job = self.service.start(
                request.text, request.voice, request.speed, self.listener, request.request_id or "",
                route="websocket", format=request.format, sample_rate=request.sample_rate,
                language=request.lang, word_timestamps=bool(request.word_timestamps),
            )
        except SpeechFault as fault:
            fault.request_id = request.request_id
            raise
        self.accepted()
        accepted = _Accepted(request, job)
        self._accepted.append(accepted)
        self.queue_answer(accepted)

    def _cancel(self, request_id: str | None) -> None:
        for accepted in self._accepted:
            if request_id is None or accepted.request.request_id == request_id:
                accepted.cancelled = True
                accepted.job.cancel()

    async def release(self) -> None:
        self._cancel(None)
        self._accepted.clear()

    # --- sending -----------------------------------------------------------------------

    async def answer(self, accepted: _Accepted) -> None:
        """One request's frames; any failure but a lost socket becomes its error frame."""
        try:
            await self._send_request(accepted)
        finally:
            accepted.job.cancel()  # ends it if it did not end already: its slot is freed
            with contextlib.suppress(ValueError):  # already dropped by release
                self._accepted.remove(accepted)

    async def _send_request(self, accepted: _Accepted) -> None:
        rid = accepted.request.request_id or ""
        try:
            final = await self._speak(accepted, rid)
        except (PeerGone, SendTimedOut):
            raise
        except SpeechFault as failure:  # logged where it happened
            fault = SpeechFault(failure.code, failure.message, rid)
        except Exception:
            log.exception("sending a request failed", extra={"request_id": rid})
            fault = SpeechFault(ErrorCode.INTERNAL, "Synthesis failed for this request.", rid)
        else:
            await self.send_within(final.to_json())
            return
        accepted.job.cancel()
        await self.send_fault(fault)

    async def _speak(self, accepted: _Accepted, rid: str) -> SynthesisComplete | SynthesisCancelled:
        """Send the start frame and the audio; return the frame that ends the request."""
        if accepted.cancelled:
            return SynthesisCancelled(request_id=rid)
        stream = self.service.stream(accepted.job, route="websocket")
        await self.send_within(stream.start_frame(rid).to_json())
        async with contextlib.aclosing(stream.chunks()) as chunks:
            async for chunk in chunks:
                if accepted.cancelled:
                    break
                if chunk.words:
                    await self.send_within(WordTimestamps(request_id=rid, words=chunk.words).to_json())
                if chunk.data:
                    await self.send_within(chunk.data)
        if accepted.cancelled or stream.result is None:
            return SynthesisCancelled(request_id=rid)
        return stream.result.complete_frame(rid)


async def serve_session(websocket: WebSocket, service: SpeechService) -> None:
    """Serve an accepted WebSocket as a session (or refuse it: see `Connection.serve`)."""
    await BidiSession.serve(WebSocketTransport(websocket), service)
