"""The bidirectional session: many requests over one WebSocket, answered strictly in order.

Each request is a context of the one context runner (`voicestream.server.contexts`), opened
``in_order``: it is queued with the scheduler as it arrives, so synthesis of later requests
overlaps the sending of earlier audio, and answered when its turn in the socket's outbox comes
(``synthesis_start``, its audio, ``synthesis_complete``), never interleaved with another's.
Messages come as text or binary frames (SageMaker forwards client payloads as binary).

A request's text may also come in pieces (*extension*, `SynthesizePiece`: ``continue:
true`` until a last piece with ``continue: false``): the pieces feed one context, the
server's one chunker and normalizer, and the utterance is answered as one request (one
``synthesis_start``, its audio chunk after chunk, one ``synthesis_complete``), with word
offsets in the whole utterance's text. Clients that never send ``continue`` see nothing of
this.

``cancel`` (one request by id, or all) is answered in place: a request cancelled before its
turn gets ``synthesis_cancelled`` alone, one being sent stops its audio and ends with it.
``close`` finishes every accepted request, then closes. At most ``max_session_requests``
accepted requests wait to be sent (more are answered ``busy``). With ``sequential``
(``voicestream serve --sequential``) the next message is read only once everything before it
was sent: the reference's strictly sequential session, kept for comparison.

The protocol is a machine without I/O (:class:`SessionMachine`); the edge (admission,
states, the send timeout, the idle clock, the error budget, going away) is the one every face
shares. The receiver never waits on the sender, so pings are answered however slowly
synthesis goes.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from enum import Enum

from starlette.websockets import WebSocket

from voicestream.audio import encoded_rate
from voicestream.edge.connection import WebSocketTransport, busy
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
from voicestream.server import contexts as ctx
from voicestream.server.contexts import ContextConnection
from voicestream.speech.core import Output, SpeechCore, Voice
from voicestream.text import STREAMED, STREAMED_SENTENCES

ROUTE = "websocket"


class _Phase(Enum):
    OPEN = "open"
    """Reading messages."""
    CLOSING = "closing"
    """``close`` came: what was accepted is answered, nothing more is read."""


class _State(Enum):
    TAKING = "taking"
    """A streamed utterance whose last piece has not come: more text may come."""
    COMPLETE = "complete"
    """All its text came (a whole request, or the last piece): it takes no more."""
    CANCELLED = "cancelled"
    """``cancel`` came: nothing more of its audio is sent; ``synthesis_cancelled`` ends it."""
    FAILED = "failed"
    """Its error frame was sent in its place: nothing more is sent for it."""


_MOVES = frozenset({
    (_State.TAKING, _State.COMPLETE), (_State.TAKING, _State.CANCELLED), (_State.COMPLETE, _State.CANCELLED),
    (_State.TAKING, _State.FAILED), (_State.COMPLETE, _State.FAILED), (_State.CANCELLED, _State.FAILED),
})
"""The legal transitions of a request (``Ended`` or ``Refused`` forgets it from any state)."""


@dataclass
class _Request:
    request_id: str
    format: str
    sample_rate: int
    state: _State
    began: bool = False
    """Its turn came (``synthesis_start`` went out, unless it was cancelled before)."""

    def move(self, to: _State) -> None:
        """The one place a request's state changes; an illegal transition is a bug, and raises."""
        if (self.state, to) not in _MOVES:
            raise RuntimeError(f"request {self.request_id!r} cannot go from {self.state.value} to {to.value}")
        self.state = to


def _voice(request: SynthesizeRequest) -> Voice:
    return Voice(request.voice, request.speed, request.lang)


def _output(request: SynthesizeRequest) -> Output:
    return Output(request.format, request.sample_rate, word_timestamps=bool(request.word_timestamps))


class SessionMachine:
    """The session's protocol without I/O (see `voicestream.server.contexts`): each request a
    context answered in order (``in_order``), a whole request's text queued at once
    (``Open.text``), a streamed utterance's pieces fed to one context, cancels answered."""

    kind = "session"
    route = ROUTE
    unit = "request"

    def __init__(self, max_requests: int, sequential: bool = False) -> None:
        self.max_requests = max_requests
        self.sequential = sequential
        self.phase = _Phase.OPEN
        self.requests: dict[str, _Request] = {}
        """Accepted requests by context, in arrival order, until answered (or refused)."""
        self._ids = itertools.count(1)

    def start(self) -> list[ctx.Command]:
        return []

    @staticmethod
    def fault_frame(fault: SpeechFault) -> str:
        return fault_frame(fault).to_json()

    # --- client messages -----------------------------------------------------------------

    def receive(self, payload: str | bytes) -> list[ctx.Command]:
        if self.phase is not _Phase.OPEN:
            raise RuntimeError("a closing session reads no more messages")
        message = parse_client_message(payload)
        if isinstance(message, CloseRequest):
            commands = self._close()
        elif isinstance(message, CancelRequest):
            commands = self._cancel(message.request_id)
        elif isinstance(message, SynthesizePiece):
            commands = self._take_piece(message)
        else:
            commands = self._accept(message.ensure_request_id())
        return [*commands, ctx.WaitSent()] if self.sequential else commands

    def _accept(self, request: SynthesizeRequest) -> list[ctx.Command]:
        rid = request.request_id or ""
        context = self._new(rid, request, _State.COMPLETE)
        return [ctx.Open(context, _voice(request), _output(request), None, rid, rid, in_order=True, text=request.text)]

    def _take_piece(self, piece: SynthesizePiece) -> list[ctx.Command]:
        """One piece of a streamed utterance: the first opens it (checked like a request),
        the others add text; ``continue: false`` ends it."""
        context = self._open_utterance(piece.request_id)
        commands: list[ctx.Command] = []
        if context is None:
            context = self._new(piece.request_id, piece, _State.TAKING)
            schedule = STREAMED if piece.chunking == "latency" else STREAMED_SENTENCES
            commands.append(ctx.Open(context, _voice(piece), _output(piece), None, piece.request_id,
                                     piece.request_id, in_order=True, schedule=schedule))
        commands.append(ctx.Feed(context, piece.text))
        if not piece.more:
            self.requests[context].move(_State.COMPLETE)
            commands.append(ctx.End(context))
        return commands

    def _open_utterance(self, request_id: str) -> str | None:
        """The context of the request ``request_id`` names (the first not cancelled), if it takes more text."""
        for context, request in self.requests.items():
            if request.request_id == request_id and request.state is not _State.CANCELLED:
                if request.state is not _State.TAKING:
                    raise ProtocolError(
                        ErrorCode.INVALID_MESSAGE,
                        f"request {request_id!r} takes no more text (it was whole, or its last piece came); "
                        "use a new request_id", request_id,
                    )
                return context
        return None

    def _new(self, request_id: str, request: SynthesizeRequest, state: _State) -> str:
        if len(self.requests) >= self.max_requests:
            raise busy(f"This session already has {self.max_requests} requests waiting to be sent; "
                       "read their audio first.", request_id)
        context = f"session-{next(self._ids)}"
        self.requests[context] = _Request(request_id, request.format, request.sample_rate, state)
        return context

    def _cancel(self, request_id: str | None) -> list[ctx.Command]:
        """Cancel one request by id (every one with that id), or all; each is answered in its place."""
        commands: list[ctx.Command] = []
        for context, request in self.requests.items():
            if (request_id is None or request.request_id == request_id) and request.state in (
                _State.TAKING, _State.COMPLETE,
            ):
                request.move(_State.CANCELLED)
                commands.append(ctx.Cancel(context, answered=True))
        return commands

    def _close(self) -> list[ctx.Command]:
        """Finish every accepted request (an utterance still open ends with what it has), then close."""
        self.phase = _Phase.CLOSING
        commands: list[ctx.Command] = []
        for context, request in self.requests.items():
            if request.state is _State.TAKING:
                request.move(_State.COMPLETE)
                commands.append(ctx.End(context))
        return [*commands, ctx.Finish()]

    # --- the core's events ---------------------------------------------------------------

    def event(self, event: ctx.Event) -> list[ctx.Command]:
        request = self.requests.get(event.context)
        if request is None:
            raise ValueError(f"an event of a request the session does not hold: {event}")
        rid = request.request_id
        match event:
            case ctx.Turn():
                if request.began:
                    raise RuntimeError(f"request {rid!r} began twice")
                request.began = True
                if request.state is _State.CANCELLED:
                    return []
                rate = encoded_rate(request.format, request.sample_rate)
                return [ctx.Send(SynthesisStart(request_id=rid, format=request.format, sample_rate=rate).to_json())]
            case ctx.Audio(_, data, _, _, words):
                frames: list[ctx.Command] = []
                if words:
                    frames.append(ctx.Send(WordTimestamps(request_id=rid, words=list(words)).to_json()))
                if data:
                    frames.append(ctx.Send(data))
                return frames
            case ctx.Failed():
                request.move(_State.FAILED)
                return []
            case ctx.Ended():
                del self.requests[event.context]
                return self._ended(request, event)
            case ctx.Refused():
                del self.requests[event.context]
                return []
            case ctx.Marked() | ctx.Sentence():
                raise ValueError(f"the session asks for no markers or sentences: {event}")

    @staticmethod
    def _ended(request: _Request, ended: ctx.Ended) -> list[ctx.Command]:
        """The frame that ends a request: none after its error, else cancelled or complete."""
        rid = request.request_id
        if request.state is _State.FAILED:
            return []
        if request.state is _State.CANCELLED or not ended.completed:
            return [ctx.Send(SynthesisCancelled(request_id=rid).to_json())]
        first_audio_ms = None if ended.first_audio_s is None else round(ended.first_audio_s * 1000, 1)
        return [ctx.Send(SynthesisComplete(
            request_id=rid, audio_bytes=ended.audio_bytes, total_duration_s=round(ended.audio_s, 4),
            elapsed_s=round(ended.elapsed_s, 4), first_audio_ms=first_audio_ms,
        ).to_json())]


async def serve_session(websocket: WebSocket, service: SpeechCore) -> None:
    """Serve an accepted WebSocket as a session (or refuse it: see `Connection.serve`)."""
    settings = service.settings
    machine = SessionMachine(settings.max_session_requests, sequential=not settings.pipelined)
    await ContextConnection.serve_face(WebSocketTransport(websocket), service, machine)
