"""The bidirectional session: many requests over one WebSocket, answered strictly in order.

Two tasks share the socket. The receiver reads messages (text or binary frames: SageMaker
forwards client payloads as binary), validates them and queues each accepted request with
the scheduler at once, so synthesis of later requests overlaps the sending of earlier
audio. The sender walks the requests in arrival order and writes each one's frames
(``synthesis_start``, audio, ``synthesis_complete``) without interleaving.

A request's text may also come in pieces (*extension*, `SynthesizePiece`: ``continue:
true`` until a last piece with ``continue: false``): the pieces feed one `StreamedSpeech`,
the server's one chunker and normalizer, and the utterance is answered as one request
(one ``synthesis_start``, its audio chunk after chunk, one ``synthesis_complete``), with
word offsets in the whole utterance's text. Clients that never send ``continue`` see
nothing of this.

With ``pipelined=False`` (``voicestream serve --sequential``) the receiver reads the next
message only once everything before it was sent: the reference's strictly sequential
session, kept for comparison.

The edge (admission, states, the send timeout, the idle clock, the error budget, going
away) is the one :class:`~voicestream.edge.connection.Connection` every face shares; this
module only parses the session's messages and formats its frames. At most
``max_session_requests`` accepted requests wait to be sent (more are answered ``busy``).
The receiver never waits on the sender, so pings are answered however slowly synthesis goes.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field

from starlette.websockets import WebSocket

from voicestream.edge.connection import (
    PeerGone,
    PeerTransport,
    SendTimedOut,
    WebSocketTransport,
    busy,
)
from voicestream.engine.alignment import offset_words
from voicestream.protocol import (
    CancelRequest,
    CloseRequest,
    ErrorCode,
    ProtocolError,
    SpeechFault,
    SynthesisCancelled,
    SynthesisComplete,
    SynthesisStart,
    SynthesizePiece,
    SynthesizeRequest,
    WordTimestamps,
    fault_frame,
    parse_client_message,
)
from voicestream.server.connection import SpeechConnection
from voicestream.speech.core import Output, SpeechCore, Voice
from voicestream.speech.job import Listener, SynthesisJob
from voicestream.speech.streamed import Spoken, StreamedSpeech
from voicestream.text import STREAMED, STREAMED_SENTENCES

log = logging.getLogger(__name__)

ROUTE = "websocket"


@dataclass
class _Accepted:
    request: SynthesizeRequest
    job: SynthesisJob | None = None
    speech: StreamedSpeech | None = None
    """A streamed utterance's text and audio (`SynthesizePiece`), instead of one job."""
    cancelled: bool = False
    """Set by ``cancel`` even when rendering already finished: audio not yet sent is dropped."""
    arrival: float = field(default_factory=time.monotonic)

    def cancel(self) -> None:
        self.cancelled = True
        self.end()

    def end(self) -> None:
        """End it now, however far it got (a no-op once its audio is all out)."""
        if self.job is not None:
            self.job.cancel()
        if self.speech is not None:
            self.speech.cancel()


class BidiSession(SpeechConnection):
    kind = "session"

    def __init__(self, transport: PeerTransport, service: SpeechCore, listener: Listener) -> None:
        super().__init__(transport, service, listener)
        self._accepted: list[_Accepted] = []

    @property
    def has_unsent(self) -> bool:
        """A request not yet sent, or an utterance with text or audio to send; an open
        utterance waiting for its client's next piece has nothing (the idle clock runs)."""
        return any(accepted.speech is None or accepted.speech.has_unsent for accepted in self._accepted)

    @classmethod
    def fault_frame(cls, fault: SpeechFault) -> str:
        return fault_frame(fault).to_json()

    async def handle(self, payload: str | bytes) -> None:
        message = parse_client_message(payload)
        if isinstance(message, CloseRequest):
            self.finish()
        elif isinstance(message, CancelRequest):
            self._cancel(message.request_id)
        elif isinstance(message, SynthesizePiece):
            self._take_piece(message)
        else:
            self._accept(message.ensure_request_id())
        if not self.service.settings.pipelined:
            await self.wait_all_sent()

    def _accept(self, request: SynthesizeRequest) -> None:
        self._check_room(request.request_id)
        try:
            job = self.service.start(
                request.text, Voice(request.voice, request.speed, request.lang),
                Output(request.format, request.sample_rate, word_timestamps=bool(request.word_timestamps)),
                self.listener, request.request_id or "", ROUTE,
            )
        except SpeechFault as fault:
            fault.request_id = request.request_id
            raise
        self._queue(_Accepted(request, job=job))

    def _check_room(self, request_id: str | None) -> None:
        limit = self.service.settings.max_session_requests
        if len(self._accepted) >= limit:
            raise busy(f"This session already has {limit} requests waiting to be sent; read their audio first.",
                       request_id)

    def _queue(self, accepted: _Accepted) -> None:
        self.accepted()
        self._accepted.append(accepted)
        self.queue_answer(accepted)

    def _take_piece(self, piece: SynthesizePiece) -> None:
        """One piece of a streamed utterance: the first opens it (checked like a request),
        the others add text; ``continue: false`` ends it."""
        speech = self._open_utterance(piece.request_id)
        if speech is None:
            speech = self._start_utterance(piece)
        else:
            self.accepted()
        speech.feed(piece.text)
        if not piece.more:
            speech.end()

    def _open_utterance(self, request_id: str) -> StreamedSpeech | None:
        for accepted in self._accepted:
            if accepted.request.request_id == request_id and not accepted.cancelled:
                if accepted.speech is None or accepted.speech.ended:
                    raise ProtocolError(
                        ErrorCode.INVALID_MESSAGE,
                        f"request {request_id!r} takes no more text (it was whole, or its last piece came); "
                        "use a new request_id", request_id,
                    )
                return accepted.speech
        return None

    def _start_utterance(self, piece: SynthesizePiece) -> StreamedSpeech:
        self._check_room(piece.request_id)
        try:
            self.service.check_voice(piece.voice, piece.speed, piece.lang)
        except SpeechFault as fault:
            fault.request_id = piece.request_id
            raise
        speech = StreamedSpeech(
            self.service, Voice(piece.voice, piece.speed, piece.lang),
            Output(piece.format, piece.sample_rate, word_timestamps=bool(piece.word_timestamps)),
            self.listener, ROUTE, piece.request_id,
            STREAMED if piece.chunking == "latency" else STREAMED_SENTENCES,
        )
        self._queue(_Accepted(piece, speech=speech))
        return speech

    def _cancel(self, request_id: str | None) -> None:
        for accepted in self._accepted:
            if request_id is None or accepted.request.request_id == request_id:
                accepted.cancel()

    def finish(self) -> None:
        """Close once everything is sent: streamed utterances still open end with what they have."""
        for accepted in self._accepted:
            if accepted.speech is not None:
                accepted.speech.end()
        super().finish()

    async def release(self) -> None:
        self._cancel(None)
        self._accepted.clear()

    # --- sending -----------------------------------------------------------------------

    async def answer(self, accepted: _Accepted) -> None:
        """One request's frames; any failure but a lost socket becomes its error frame."""
        try:
            await self._send_request(accepted)
        finally:
            accepted.end()  # ends it if it did not end already: its slot is freed
            with contextlib.suppress(ValueError):  # already dropped by release
                self._accepted.remove(accepted)

    async def _send_request(self, accepted: _Accepted) -> None:
        rid = accepted.request.request_id or ""
        try:
            final = await (self._speak(accepted, rid) if accepted.speech is None else self._speak_streamed(accepted, rid))
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
        accepted.end()
        await self.send_fault(fault)

    async def _speak(self, accepted: _Accepted, rid: str) -> SynthesisComplete | SynthesisCancelled:
        """Send the start frame and the audio; return the frame that ends the request."""
        if accepted.cancelled or accepted.job is None:
            return SynthesisCancelled(request_id=rid)
        stream = self.service.stream(accepted.job, route=ROUTE)
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

    async def _speak_streamed(self, accepted: _Accepted, rid: str) -> SynthesisComplete | SynthesisCancelled:
        """A streamed utterance: one start frame, then each chunk's words (their times from
        the utterance's start, their offsets in its text) and audio, as the chunks come."""
        speech, request = accepted.speech, accepted.request
        assert speech is not None
        if accepted.cancelled:
            return SynthesisCancelled(request_id=rid)
        await self.send_within(SynthesisStart(request_id=rid, format=request.format,
                                              sample_rate=request.sample_rate).to_json())
        spoken_s, sent, first_audio_ms = 0.0, 0, None
        async for item in speech:
            if not isinstance(item, Spoken):
                continue
            async with contextlib.aclosing(item.stream.chunks()) as chunks:
                async for chunk in chunks:
                    if accepted.cancelled:
                        return SynthesisCancelled(request_id=rid)
                    if chunk.words:
                        words = offset_words(item.located(chunk.words), spoken_s)
                        await self.send_within(WordTimestamps(request_id=rid, words=words).to_json())
                    if chunk.data:
                        if first_audio_ms is None and chunk.seconds:
                            first_audio_ms = (time.monotonic() - accepted.arrival) * 1000
                        await self.send_within(chunk.data)
                        sent += len(chunk.data)
            if item.stream.result is None:  # cancelled while it was sent
                return SynthesisCancelled(request_id=rid)
            spoken_s += item.stream.result.total_duration_s
        if accepted.cancelled:
            return SynthesisCancelled(request_id=rid)
        return SynthesisComplete(
            request_id=rid, audio_bytes=sent, total_duration_s=round(spoken_s, 4),
            elapsed_s=round(time.monotonic() - accepted.arrival, 4),
            first_audio_ms=None if first_audio_ms is None else round(first_audio_ms, 1),
        )


async def serve_session(websocket: WebSocket, service: SpeechCore) -> None:
    """Serve an accepted WebSocket as a session (or refuse it: see `Connection.serve`)."""
    await BidiSession.serve(WebSocketTransport(websocket), service)
