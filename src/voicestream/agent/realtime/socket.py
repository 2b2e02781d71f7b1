"""The Realtime WebSocket: a face on the one edge (`voicestream.edge.connection`), the speech
server's connections' own.

The edge reads client events under one idle clock (`realtime_idle_s`, 600 s: a socket with
nothing under way that hears nothing is closed, 1000), sends the outbox in order, each frame
within `realtime_send_s` (30 s) of the client's last byte or the socket is dropped (a client
that stops reading frees the agent at that timeout), answers each bad event with one `error`
event within one error budget, and goes away (1001) when the agent drains, once the socket is
idle. This module only parses events (the session acts on them), formats errors, and says what
a response's deltas are: a stream of frames that waits while `MAX_QUEUED_DELTAS` items wait
(the response then holds back its LLM and speech session) and can be dropped, its waiting
deltas with it, when the response is cancelled.
"""

from __future__ import annotations

import json
import logging
from typing import Any, ClassVar

from starlette.websockets import WebSocket

from voicestream.access import accepted_subprotocol
from voicestream.agent.realtime.session import RealtimeSession
from voicestream.agent.service import AgentService
from voicestream.edge.connection import POLICY, Connection, WebSocketTransport, serve_connection
from voicestream.protocol import MAX_SESSION_ID_CHARS, SESSION_HEADER, ErrorCode, SpeechFault
from voicestream.protocol.realtime import ErrorEvent, RealtimeError, ServerEvent, parse_client_event

logger = logging.getLogger(__name__)

MAX_QUEUED_DELTAS = 64
"""Items waiting in the outbox beyond which a response waits before queueing more deltas."""
MAX_QUEUED_EVENTS = 4096
"""Beyond this many events waiting (a client flooding events, say) the socket closes (1008)."""


class _Deltas:
    """One response's deltas (`voicestream.edge.connection.Stream`)."""

    __slots__ = ("dropped",)

    def __init__(self) -> None:
        self.dropped = False


def conversation_id(websocket: WebSocket) -> str | None:
    """AgentCore's session id header, which names the conversation (as on /invocations)."""
    value = websocket.headers.get(SESSION_HEADER)
    return value or None


class RealtimeSocket(Connection):
    """One Realtime socket from accept to close; the agent's drain sees it
    (`AgentService.connections`)."""

    kind = "Realtime socket"
    faults: ClassVar[tuple[type[Exception], ...]] = (RealtimeError,)

    def __init__(self, transport: WebSocketTransport, service: AgentService, slot: object, session_id: str | None):
        super().__init__(transport, service, slot)
        self.session = RealtimeSession(service, self._put, self._drop, session_id)
        self._responses: dict[str, _Deltas] = {}
        self._handling = False

    @classmethod
    def fault_frame(cls, fault: Any) -> str:
        if isinstance(fault, SpeechFault):  # the edge's own refusal
            error_type = "server_error" if fault.code is ErrorCode.BUSY else "invalid_request_error"
            fault = RealtimeError(fault.message, code=fault.code.value, type=error_type)
        return json.dumps(ErrorEvent.of(fault).wire())

    @property
    def has_unsent(self) -> bool:
        """An event being handled, a response, a transcription: going away now would lose it."""
        return self._handling or self.session.response is not None or self.session.busy

    async def run(self) -> int | None:
        await self.session.open()
        return await super().run()

    async def handle(self, message: str | bytes) -> None:
        if isinstance(message, bytes):
            raise RealtimeError("events are JSON text frames, not binary ones", code="invalid_json")
        self._handling = True
        try:
            await self.session.handle(parse_client_event(message))
        except RealtimeError:
            raise
        except Exception:  # the event fails, the socket goes on
            logger.exception("a realtime event failed")
            raise RealtimeError(
                "the agent failed on this event; see its log", code="internal", type="server_error"
            ) from None
        finally:
            self._handling = False
        self.accepted()

    async def release(self) -> None:
        await self.session.close()

    async def _put(self, event: ServerEvent, response_id: str | None) -> None:
        """The session's send: an event, or one of a response's deltas."""
        frame = json.dumps(event.wire())
        if response_id is not None:
            await self.emit(frame, self._responses.setdefault(response_id, _Deltas()), MAX_QUEUED_DELTAS)
        elif self.queued >= MAX_QUEUED_EVENTS:
            logger.warning("closing a Realtime socket with %d events unread (1008)", self.queued)
            self.go_away(POLICY)
        else:
            self.queue(frame)

    def _drop(self, response_id: str) -> None:
        """Forget a response's waiting deltas, and any it would still queue."""
        self._responses.setdefault(response_id, _Deltas()).dropped = True
        self.dropped()


async def serve_realtime(websocket: WebSocket, service: AgentService) -> None:
    """Run one Realtime socket to its end (the route's handler). While the agent drains, a
    new socket gets one `busy` error and goes away (1001)."""
    session_id = conversation_id(websocket)
    if session_id is not None and len(session_id) > MAX_SESSION_ID_CHARS:
        await websocket.close(POLICY, f"{SESSION_HEADER} must hold at most {MAX_SESSION_ID_CHARS} characters")
        return
    await websocket.accept(subprotocol=accepted_subprotocol(websocket.scope))
    transport = WebSocketTransport(websocket)
    await serve_connection(
        transport, service, lambda slot: RealtimeSocket(transport, service, slot, session_id), RealtimeSocket.fault_frame,
    )
