"""The Realtime WebSocket: client events in, server events out, in order, within bounds.

Two tasks: the reader parses each text frame and lets the session act on it (a bad or
unsupported event is answered with one `error` event; the socket stays open); the sender
takes the outbox in order, each frame within the agent's `realtime_send_s` (30 s), or the
socket is dropped (the close it would never take is not sent): a client that stops reading
frees the agent and its connection at that timeout. A socket with nothing under way that
hears nothing for `realtime_idle_s` (600 s) is closed (1000). The outbox holds a
response's deltas up to `MAX_QUEUED_DELTAS` (the response then waits, holding back its LLM
and speech session), and can drop a cancelled response's deltas before they go out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque

from starlette.types import Message
from starlette.websockets import WebSocket, WebSocketDisconnect

from voicestream.access import accepted_subprotocol
from voicestream.agent.realtime.session import RealtimeSession
from voicestream.agent.service import AgentService
from voicestream.asgi import abort_connection
from voicestream.protocol import MAX_SESSION_ID_CHARS, SESSION_HEADER
from voicestream.protocol.realtime import ErrorEvent, RealtimeError, ServerEvent, parse_client_event

logger = logging.getLogger(__name__)

MAX_QUEUED_DELTAS = 64
MAX_QUEUED_EVENTS = 4096
"""Beyond this many events waiting (a client flooding bad events, say) the socket closes."""
NORMAL, GOING_AWAY, POLICY = 1000, 1001, 1008
CLOSE_TIMEOUT_S = 5.0
"""How long the close (and a refusal's one event) may take to leave."""


class OutboxFull(Exception):
    pass


class Outbox:
    """Server events waiting to be sent; a response's deltas carry its id as a tag."""

    def __init__(self) -> None:
        self._events: deque[tuple[ServerEvent, str | None]] = deque()
        self._changed = asyncio.Condition()
        self._dropped: set[str] = set()

    async def put(self, event: ServerEvent, tag: str | None = None) -> None:
        async with self._changed:
            if tag is not None:
                await self._changed.wait_for(
                    lambda: (
                        tag in self._dropped
                        or sum(1 for _, t in self._events if t is not None) < MAX_QUEUED_DELTAS
                    )
                )
                if tag in self._dropped:
                    return
            if len(self._events) >= MAX_QUEUED_EVENTS:
                raise OutboxFull
            self._events.append((event, tag))
            self._changed.notify_all()

    @property
    def empty(self) -> bool:
        return not self._events

    def drop(self, tag: str) -> None:
        """Forget `tag`'s waiting deltas, and any it would still queue."""
        self._dropped.add(tag)
        self._events = deque((e, t) for e, t in self._events if t != tag)

    async def get(self) -> ServerEvent:
        async with self._changed:
            await self._changed.wait_for(lambda: bool(self._events))
            event, _ = self._events.popleft()
            self._changed.notify_all()
            return event


def conversation_id(websocket: WebSocket) -> str | None:
    """AgentCore's session id header, which names the conversation (as on /invocations)."""
    value = websocket.headers.get(SESSION_HEADER)
    return value or None


class RealtimeSocket:
    """One socket from accept to close. The agent's drain sees it (`AgentService.sockets`):
    once it is `idle` it is sent away (1001), as the speech server's connections are."""

    def __init__(self, websocket: WebSocket, service: AgentService, session_id: str | None):
        self.websocket = websocket
        self.service = service
        self.outbox = Outbox()
        self.session = RealtimeSession(service, self.outbox.put, self.outbox.drop, session_id)
        self._loop = asyncio.get_running_loop()
        self._gone: asyncio.Future[int] = self._loop.create_future()
        self._handling = False
        self._sending = False
        self.stalled = False
        """An event did not leave within `realtime_send_s`: the client reads nothing, so the
        socket is dropped at its end instead of being sent a close it would never take."""
        self._last_activity = time.monotonic()
        """When the client last sent an event or the socket last sent one: the idle clock's start."""

    @property
    def idle(self) -> bool:
        """Nothing left to send and nothing under way (an event being handled, a response,
        a transcription): going away now loses nothing."""
        return (
            self.outbox.empty
            and not self._sending
            and not self._handling
            and self.session.response is None
            and not self.session.busy
        )

    def go_away(self, code: int = GOING_AWAY) -> None:
        """Close now with `code` (safe from any thread: a drain may run on another loop)."""
        self._loop.call_soon_threadsafe(self._close_with, code)

    def _close_with(self, code: int) -> None:
        if not self._gone.done():
            self._gone.set_result(code)

    async def run(self) -> int:
        """Serve until the client leaves, a bound is passed or the agent sends it away;
        everything it started is stopped before this returns the close code."""
        sender = asyncio.create_task(self._send_all(), name="realtime-send")
        reader = asyncio.create_task(self._read_all(), name="realtime-read")
        close = NORMAL
        try:
            await self.session.open()
            ends = {sender, reader, self._gone}
            done, _ = await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
            if self._gone in done:
                close = self._gone.result()
            elif sender in done or (
                not reader.cancelled() and isinstance(reader.exception(), OutboxFull)
            ):
                close = POLICY
        finally:
            for task in (reader, sender):
                task.cancel()
            await asyncio.gather(reader, sender, return_exceptions=True)
            await self.session.close()
        return close

    async def _read_all(self) -> None:
        while True:
            message = await self._receive_or_idle()
            if message is None or message["type"] == "websocket.disconnect":
                return
            self._handling = True
            try:
                await self._handle(message.get("text"))
            finally:
                self._handling = False

    async def _receive_or_idle(self) -> Message | None:
        """The next message; None once nothing was received or sent for `realtime_idle_s`
        and the socket is idle (an answer being sent keeps it open, however long). The
        clock starts at the last event either way, as the speech server's connections' does."""
        idle_s = self.service.settings.limits.realtime_idle_s
        receiving = asyncio.ensure_future(self.websocket.receive())
        try:
            while True:
                remaining = self._last_activity + idle_s - time.monotonic()
                if remaining <= 0:
                    if self.idle:
                        logger.info("closing a realtime socket idle for %g s (1000)", idle_s)
                        return None
                    remaining = idle_s  # something under way that sends nothing yet: look again later
                if (await asyncio.wait((receiving,), timeout=remaining))[0]:
                    self._last_activity = time.monotonic()
                    return receiving.result()
        finally:
            receiving.cancel()

    async def _handle(self, text: str | None) -> None:
        try:
            if text is None:
                raise RealtimeError(
                    "events are JSON text frames, not binary ones", code="invalid_json"
                )
            await self.session.handle(parse_client_event(text))
        except RealtimeError as error:
            await self.outbox.put(ErrorEvent.of(error))
        except OutboxFull:
            raise
        except Exception:
            logger.exception("a realtime event failed")
            await self.outbox.put(
                ErrorEvent.of(
                    RealtimeError(
                        "the agent failed on this event; see its log",
                        code="internal",
                        type="server_error",
                    )
                )
            )

    async def _send_all(self) -> None:
        while True:
            event = await self.outbox.get()
            self._sending = True
            send_s = self.service.settings.limits.realtime_send_s
            try:
                async with asyncio.timeout(send_s):
                    await self.websocket.send_text(json.dumps(event.wire()))
                self._last_activity = time.monotonic()
            except TimeoutError:
                logger.warning("a realtime client read nothing for %g s; dropping it", send_s)
                self.stalled = True
                return
            except (WebSocketDisconnect, RuntimeError, OSError):
                return
            finally:
                self._sending = False


async def serve_realtime(websocket: WebSocket, service: AgentService) -> None:
    """Run one Realtime socket to its end (the route's handler). While the agent drains, a
    new socket gets one `busy` error and goes away (1001)."""
    session_id = conversation_id(websocket)
    if session_id is not None and len(session_id) > MAX_SESSION_ID_CHARS:
        await websocket.close(
            POLICY, f"{SESSION_HEADER} must hold at most {MAX_SESSION_ID_CHARS} characters"
        )
        return
    await websocket.accept(subprotocol=accepted_subprotocol(websocket.scope))
    if service.draining:
        busy = RealtimeError(
            "the agent is shutting down; try again shortly", code="busy", type="server_error"
        )
        await _close_within(websocket, GOING_AWAY, ErrorEvent.of(busy))
        return
    socket = RealtimeSocket(websocket, service, session_id)
    service.sockets.add(socket)
    try:
        close = await socket.run()
    finally:
        service.sockets.discard(socket)
    if not (socket.stalled and abort_connection(websocket.scope)):
        await _close_within(websocket, close)


async def _close_within(websocket: WebSocket, code: int, last: ServerEvent | None = None) -> None:
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CLOSE_TIMEOUT_S):
            if last is not None:
                await websocket.send_text(json.dumps(last.wire()))
            await websocket.close(code)
