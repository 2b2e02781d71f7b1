"""One edge for every persistent connection of both servers: the speech server's session,
Cartesia's, ElevenLabs' and Deepgram's sockets, Wyoming, and the agent's Realtime socket.

A :class:`Connection` is what sits between a wire protocol and the server it runs in. It
admits a new peer through the server's small admission protocol (:class:`Host`: a slot, the
limits, the counts, the set the drain walks), refuses one it cannot take with a single
``busy`` and a close, and then runs two tasks over one :class:`PeerTransport`:

- the receiver reads messages under one idle clock and hands each to :meth:`handle`; a
  fault it raises becomes an error frame, within one error budget;
- the sender takes the outbox in order: plain frames, error frames, and answers (a request's
  whole audio) that the face sends with :meth:`send_within`.

Every outgoing frame leaves within the send timeout (the speech server's ``--send-timeout``) or the connection is closed (1008):
a peer that stops reading frees its slots at that timeout on every face. Where the
transport says how many bytes wait in the server's own buffer, the timeout runs from the
last time one of them left: a send returns while its bytes fit below the buffer's
high-water mark, so the send that blocks may come a whole render after the peer stopped.
The idle clock runs while nothing was received, nothing sent, and :attr:`idle` holds
(nothing left to send and nothing asked, whatever is open): a peer that never speaks is
closed at ``--idle-timeout`` (1000). Draining for shutdown, a connection goes away (1001) as soon as it
is idle (the drain asks every connection), and at the end of the grace whatever it holds.

States, as Starlette's ``WebSocketState`` guards a socket's: OPEN (reading and answering),
CLOSING (reading no more: answering what was accepted, or about to close), CLOSED. Once
the connection decides to close it reads nothing more, releases everything it holds and
the server forgets it; only then is the close sent, within ``CLOSE_TIMEOUT_S``, or, for a
peer that took no frame for ``--send-timeout``, the connection dropped at once (it would
never take the close).

A subclass only parses (:meth:`handle`), formats (:meth:`fault_frame`) and sends its answers
(:meth:`answer`): the speech server's socket faces are protocol machines run by one subclass,
`voicestream.server.contexts.ContextConnection`; the agent's Realtime socket is another. The
transports differ only in their primitives (receive, send, close, and what they can tell of
their buffer and offer to drop). A connection's options (what its URL asked for) come with
the factory `serve_connection` is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, Protocol

from starlette.websockets import WebSocket, WebSocketDisconnect

from voicestream.asgi import WRITE_BUFFER, abort_connection
from voicestream.protocol import ErrorCode, SpeechFault

log = logging.getLogger(__name__)

MAX_PENDING_ERRORS = 4096
"""Error frames waiting to be sent, beyond which the connection is closed with 1008."""
WAITED_S = 0.05
"""A send that took longer waited for the server's buffer to drain, so the peer took bytes."""
CLOSE_TIMEOUT_S = 5.0
"""How long a refusal or the close may take to leave (a peer that never reads blocks it)."""

NORMAL, GOING_AWAY, POLICY, INTERNAL, TRY_LATER = 1000, 1001, 1008, 1011, 1013
"""The close codes (RFC 6455); Wyoming has none, its connections count the same ones."""


@dataclass(frozen=True)
class EdgeLimits:
    """The edge's bounds on one connection, from the server's settings."""

    send_timeout_s: float
    """A frame that does not leave within this (from the peer's last byte) closes it (1008)."""
    idle_timeout_s: float
    """Nothing received, nothing sent and nothing under way for this closes it (1000)."""
    max_errors_in_a_row: int
    """More bad messages in a row than this close it (1008)."""


class Host(Protocol):
    """What the edge needs of the server it runs in, a small admission protocol: the speech
    server's core and the agent's service each provide it, and the edge imports neither."""

    @property
    def edge_limits(self) -> EdgeLimits: ...

    @property
    def draining(self) -> bool:
        """Shutting down: new connections are refused."""
        ...

    @property
    def connections(self) -> set[Any]:
        """The open connections (the drain sends each away)."""
        ...

    def admit_connection(self) -> object | None:
        """A slot for one more connection (the speech server's: its share of the queue), or
        None when the server has no room."""
        ...

    def release_connection(self, slot: object) -> None: ...

    def count_error(self, code: str) -> None:
        """An error frame sent (or a refusal), by its code."""
        ...

    def count_close(self, code: int) -> None:
        """A connection the server closed, by close code."""
        ...

    def changed(self) -> None:
        """A connection came or went, took a message, or sent what it had queued: whether it
        is idle may have changed (the drain waits on this, from any thread)."""
        ...


class ConnectionState(Enum):
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


_NEXT_STATES = {
    ConnectionState.OPEN: {ConnectionState.CLOSING, ConnectionState.CLOSED},
    ConnectionState.CLOSING: {ConnectionState.CLOSING, ConnectionState.CLOSED},
    ConnectionState.CLOSED: set(),
}
"""The transitions a connection may make: it never opens again."""


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class PeerGone(Exception):
    """The peer disconnected (or its end of the stream closed): nothing more can be sent."""


class SendTimedOut(Exception):
    """A frame did not leave within ``--send-timeout``: the connection is being closed."""


class PeerTransport(Protocol):
    """The three primitives a face's wire offers; ``receive`` raises :class:`PeerGone` at the end
    and may raise a :class:`SpeechFault` for a message it cannot even frame."""

    async def receive(self) -> Any: ...

    async def send(self, frame: Any) -> None: ...

    async def close(self, code: int | None) -> None: ...

    def unsent_bytes(self) -> int | None:
        """Bytes that wait in the server's own buffer for the peer; None if unknown."""
        ...

    def abort(self) -> bool:
        """Drop the connection now, unsent bytes and all (for a peer that reads nothing);
        False if the transport cannot, and the close is then sent as usual."""
        ...


class WebSocketTransport:
    """A Starlette WebSocket: messages are text or bytes (SageMaker forwards text as binary);
    frames are text, bytes, or a dict sent as JSON text."""

    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket

    async def receive(self) -> str | bytes:
        message = await self.websocket.receive()
        if message["type"] == "websocket.disconnect":
            raise PeerGone
        return message["text"] if message.get("text") is not None else message.get("bytes") or b""

    async def send(self, frame: str | bytes | dict[str, Any]) -> None:
        try:
            if isinstance(frame, bytes):
                await self.websocket.send_bytes(frame)
            elif isinstance(frame, str):
                await self.websocket.send_text(frame)
            else:
                await self.websocket.send_json(frame)
        except (WebSocketDisconnect, OSError):
            raise PeerGone from None

    async def close(self, code: int | None) -> None:
        if code is not None:
            await self.websocket.close(code=code)

    def unsent_bytes(self) -> int | None:
        buffer = self.websocket.scope.get("extensions", {}).get(WRITE_BUFFER)
        return None if buffer is None else buffer["size"]()

    def abort(self) -> bool:
        return abort_connection(self.websocket.scope)


@dataclass(frozen=True)
class _ErrorFrame:
    """An error frame in the outbox (counted against ``MAX_PENDING_ERRORS`` until sent)."""

    frame: Any


class Stream(Protocol):
    """What a face's frames may belong to (a context, a response): once ``dropped``, its frames
    still waiting are not sent."""

    @property
    def dropped(self) -> bool: ...


@dataclass(frozen=True)
class _Streamed:
    """A frame of a stream, sent only if the stream was not dropped meanwhile."""

    stream: Stream
    frame: Any


@dataclass(frozen=True)
class _Answer:
    """An outbox item the face sends itself, frame by frame (:meth:`Connection.answer`)."""

    item: Any


_CLOSE = object()


def busy(message: str, request_id: str | None = None) -> SpeechFault:
    return SpeechFault(ErrorCode.BUSY, message, request_id)


class Connection:
    """One persistent connection; see the module's docstring. Subclasses set ``kind`` (for
    the log) and override :meth:`handle`, :meth:`fault_frame`, :meth:`answer`,
    :attr:`has_unsent` and :meth:`release`."""

    kind: ClassVar[str] = "connection"
    faults: ClassVar[tuple[type[Exception], ...]] = (SpeechFault,)
    """What the face raises for a message it answers with an error frame (its error root, with
    a ``code`` and a ``message``); the connection goes on."""

    def __init__(self, transport: PeerTransport, host: Host, slot: object) -> None:
        self.transport = transport
        self.host = host
        self.slot = slot
        """What admission gave the connection (the speech server's: its share of the queue)."""
        self.state = ConnectionState.OPEN
        self.stalled = False
        """A frame did not leave within ``--send-timeout``: the peer reads nothing, so the
        connection is dropped at its end instead of being sent a close."""
        self._outbox: asyncio.Queue[Any] = asyncio.Queue()
        """Bounded by the faces: ``max_session_requests`` answers, ``MAX_PENDING_ERRORS``
        error frames, a close marker, and what each face bounds of its own frames."""
        self._pending_errors = 0
        self._errors_in_a_row = 0
        self._sends = 0
        """Frames being sent now (:meth:`send_within`): the connection is not idle meanwhile."""
        self._last_activity = time.monotonic()
        self._held_bytes = 0
        self._held_since: float | None = None
        """Since when bytes have waited in the server's buffer with none of them leaving."""
        self._loop = asyncio.get_running_loop()
        self._close_now: asyncio.Future[int] = self._loop.create_future()
        self._reading: asyncio.Task[Any] | None = None
        self._sent = asyncio.Event()
        """Set after each outbox item is sent (``wait_all_sent`` waits on it)."""

    # --- what a face provides -----------------------------------------------------------

    async def handle(self, message: Any) -> None:
        """One message from the peer; raise a :class:`SpeechFault` to answer it with an error."""
        raise NotImplementedError

    @classmethod
    def fault_frame(cls, fault: Any) -> Any:
        """The face's error frame for ``fault`` (one of its ``faults``, or the edge's own
        `SpeechFault`: a refusal); None where its protocol has none (nothing is sent)."""
        raise NotImplementedError

    async def answer(self, item: Any) -> None:
        """Send an outbox item that is not a frame (a request's audio), frame by frame."""
        raise NotImplementedError

    @property
    def has_unsent(self) -> bool:
        """Something accepted (beyond the outbox) still has audio or text to send."""
        return False

    async def release(self) -> None:
        """Cancel everything the connection holds (it is ending, whatever the reason)."""

    # --- the edge -----------------------------------------------------------------------

    @property
    def idle(self) -> bool:
        """Nothing left to send and nothing asked: going away now loses no audio (the
        idle clock and the drain both wait for this)."""
        return self._outbox.empty() and not self._sends and not self.has_unsent

    def go_away(self, code: int = GOING_AWAY) -> None:
        """Close now with ``code`` (1001: the server is shutting down); unsent work is dropped.
        Safe from another thread (a drain may run on another loop than the connection's)."""
        if _running_loop() is not self._loop:
            self._loop.call_soon_threadsafe(self.go_away, code)
            return
        if self.state is ConnectionState.CLOSED:
            return
        self._move(ConnectionState.CLOSING)
        if not self._close_now.done():
            self._close_now.set_result(code)

    def finish(self) -> None:
        """Read no more; close (1000) once everything queued so far is sent."""
        if self.state is ConnectionState.CLOSED:
            return
        self._move(ConnectionState.CLOSING)
        self._outbox.put_nowait(_CLOSE)

    def _move(self, to: ConnectionState) -> None:
        """The one place the state changes; an illegal transition is a bug, and raises."""
        if to not in _NEXT_STATES[self.state]:
            raise RuntimeError(f"{self.a_kind} cannot go from {self.state.value} to {to.value}")
        self.state = to

    def queue(self, frame: Any) -> None:
        """Put a frame in the outbox, after everything queued before it."""
        self._outbox.put_nowait(frame)

    async def emit(self, frame: Any, stream: Stream, limit: int) -> None:
        """Queue ``frame`` of ``stream`` (a context's audio, a response's deltas), then wait
        while more than ``limit`` items wait in the outbox: a stream that outruns its peer
        holds back (until the send timeout closes a peer that reads nothing). Returns at once
        for a dropped stream, whose frames still waiting are skipped when their turn comes."""
        if stream.dropped:
            return
        self._outbox.put_nowait(_Streamed(stream, frame))
        while self._outbox.qsize() > limit and not stream.dropped:
            self._sent.clear()
            await self._sent.wait()

    def dropped(self) -> None:
        """A stream was just dropped: its waits end (`emit`)."""
        self._sent.set()

    @property
    def queued(self) -> int:
        """Items waiting in the outbox."""
        return self._outbox.qsize()

    def queue_answer(self, item: Any) -> None:
        """Put an answer in the outbox: :meth:`answer` sends it when its turn comes."""
        self._outbox.put_nowait(_Answer(item))

    def accepted(self) -> None:
        """A good message: the count of bad ones in a row starts again."""
        self._errors_in_a_row = 0

    def reject(self, fault: Exception) -> None:
        """Answer a bad message with its error frame, never waiting; or close (1008) a peer
        that sent ``--max-session-errors`` bad ones in a row (logged once: it reads no more)."""
        self._errors_in_a_row += 1
        if self._errors_in_a_row > self.host.edge_limits.max_errors_in_a_row:
            log.warning("closing %s after %d bad messages in a row (1008)", self.a_kind, self._errors_in_a_row - 1)
            self.go_away(POLICY)
            return
        self.report(fault)

    def report(self, fault: Exception) -> None:
        """Queue ``fault``'s error frame, never waiting; a peer that leaves more than
        ``MAX_PENDING_ERRORS`` of them unread is closed (1008)."""
        if self._pending_errors >= MAX_PENDING_ERRORS:
            log.warning("closing %s with %d unread error frames (1008)", self.a_kind, self._pending_errors)
            self.go_away(POLICY)
            return
        self.host.count_error(_code(fault))
        self._pending_errors += 1
        self._outbox.put_nowait(_ErrorFrame(self.fault_frame(fault)))

    async def send_within(self, frame: Any) -> None:
        """Send one frame within ``--send-timeout`` of the later of its start and the last
        byte the peer took, else decide to close (1008) and raise :class:`SendTimedOut`."""
        timeout_s = self.host.edge_limits.send_timeout_s
        now = time.monotonic()
        deadline = min(now, self._stuck_since(now)) + timeout_s
        self._sends += 1
        try:
            if deadline <= now:
                raise TimeoutError
            async with asyncio.timeout(deadline - now):
                await self.transport.send(frame)
        except TimeoutError:
            log.warning("dropping %s that took no frame for %g s (1008)", self.a_kind, timeout_s)
            self.stalled = True
            self.go_away(POLICY)
            raise SendTimedOut from None
        finally:
            self._sends -= 1
        self._last_activity = time.monotonic()
        if self._last_activity - now > WAITED_S:
            self._held_since = None  # it waited for the buffer to drain: bytes left meanwhile
        self._stuck_since(self._last_activity)

    def _stuck_since(self, now: float) -> float:
        """Since when the bytes waiting in the server's buffer have had none leave (``now``
        if none wait, one left since the last look, or the transport cannot tell). Bytes a
        send adds count from the first look that finds them."""
        held = self.transport.unsent_bytes()
        if not held:
            self._held_since = None
        elif self._held_since is None or held < self._held_bytes:
            self._held_since = now
        self._held_bytes = held or 0
        return now if self._held_since is None else self._held_since

    @property
    def a_kind(self) -> str:
        """The kind with its article, for the log ("an ElevenLabs socket")."""
        return ("an " if self.kind[0] in "AEIOUaeiou" else "a ") + self.kind

    async def send_fault(self, fault: SpeechFault) -> None:
        """Send ``fault``'s error frame now, from the sender (a request that failed while
        being sent: its error takes its place in the order)."""
        self.host.count_error(_code(fault))
        frame = self.fault_frame(fault)
        if frame is not None:  # a face with no error frame
            await self.send_within(frame)

    async def wait_all_sent(self) -> None:
        """Until everything queued is sent (the session's sequential mode)."""
        while not self.idle:
            self._sent.clear()
            await self._sent.wait()

    # --- running ------------------------------------------------------------------------

    async def run(self) -> int | None:
        """Serve until close, disconnect, a timeout or shutdown; return the close code to
        send (None: the peer is gone). Everything the connection holds is released before
        this returns; a task that breaks gives 1011."""
        receiver = asyncio.create_task(self._receive_loop(), name=f"{self.kind}-receiver")
        sender = asyncio.create_task(self._send_loop(), name=f"{self.kind}-sender")
        try:
            return await self._outcome(receiver, sender)
        except PeerGone:
            return None
        except Exception:
            log.exception("%s failed; closing it", self.a_kind)
            return INTERNAL
        finally:
            self._move(ConnectionState.CLOSED)
            tasks = [receiver, sender, *([self._reading] if self._reading else [])]
            for task in (*tasks, self._close_now):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.release()

    async def _outcome(self, receiver: asyncio.Task, sender: asyncio.Task) -> int | None:
        done, _ = await asyncio.wait((receiver, sender, self._close_now), return_when=asyncio.FIRST_COMPLETED)
        if self._close_now in done:
            return self._close_now.result()
        if receiver in done:
            receiver.result()  # a peer that left ends the connection here
            if self.state is not ConnectionState.CLOSING:
                return None
            done, _ = await asyncio.wait((sender, self._close_now), return_when=asyncio.FIRST_COMPLETED)
            if self._close_now in done:
                return self._close_now.result()
        error = None if sender.cancelled() else sender.exception()
        if error is None:
            return NORMAL
        if isinstance(error, PeerGone):
            return None
        log.error("%s's sender failed; closing it", self.a_kind, exc_info=error)
        return INTERNAL

    async def _receive_loop(self) -> None:
        while self.state is ConnectionState.OPEN:
            try:
                message = await self._receive_or_idle()
            except self.faults as fault:  # a message the transport could not frame
                self.reject(fault)
                if getattr(fault, "fatal", False):
                    self.finish()
                continue
            if message is _CLOSE:
                return
            try:
                await self.handle(message)
            except self.faults as fault:
                self.reject(fault)
            self.host.changed()

    async def _receive_or_idle(self) -> Any:
        """The next message; ``_CLOSE`` once the connection was idle for ``--idle-timeout``
        (it is then finishing). The read goes on across the idle checks, so that a face
        whose messages span several reads (Wyoming) never loses half of one."""
        idle_timeout_s = self.host.edge_limits.idle_timeout_s
        while True:
            remaining = self._last_activity + idle_timeout_s - time.monotonic()
            if remaining <= 0:
                if self.idle:
                    log.info("closing %s that was idle for %g s (1000)", self.a_kind, idle_timeout_s)
                    self.host.count_close(NORMAL)
                    self.finish()
                    return _CLOSE
                remaining = idle_timeout_s
            if self._reading is None:
                self._reading = asyncio.create_task(self.transport.receive(), name=f"{self.kind}-read")
            done, _ = await asyncio.wait((self._reading,), timeout=remaining)
            if not done:
                continue
            reading, self._reading = self._reading, None
            self._last_activity = time.monotonic()
            return reading.result()

    async def _send_loop(self) -> None:
        while True:
            item = await self._outbox.get()
            if item is _CLOSE:
                return
            try:
                if isinstance(item, _Streamed):
                    if not item.stream.dropped:
                        await self.send_within(item.frame)
                elif isinstance(item, _Answer):
                    await self.answer(item.item)
                elif isinstance(item, _ErrorFrame):
                    self._pending_errors -= 1
                    if item.frame is not None:  # a face with no error frame
                        await self.send_within(item.frame)
                else:
                    await self.send_within(item)
            finally:
                self._sent.set()
                self.host.changed()

    # --- admission ----------------------------------------------------------------------

    @classmethod
    async def serve(cls, transport: PeerTransport, host: Host | None) -> None:
        """`serve_connection` for a face whose connection class takes no options."""
        await serve_connection(transport, host, lambda slot: cls(transport, host, slot), cls.fault_frame)


async def serve_connection(
    transport: PeerTransport, host: Host | None, connect: Callable[[object], Connection],
    fault_frame: Callable[[SpeechFault], Any],
) -> None:
    """Admit and serve a peer with the connection ``connect`` makes for its slot (the face's
    options are the factory's, as the ``wyoming`` package's ``HandlerFactory`` holds them),
    or refuse it with one ``busy`` in ``fault_frame``'s shape (None: no frame) and the close
    1013 (the server not ready or full) or 1001 (draining). The server forgets the connection (its slots, its requests) before the
    close is sent, which a peer that reads nothing never takes."""
    slot = None if host is None or host.draining else host.admit_connection()
    if host is None or slot is None:
        await _refuse(transport, host, fault_frame)
        return
    connection = connect(slot)
    async with registered(host, connection, slot):
        code = await connection.run()
    if code is not None and code != NORMAL:  # an idle close is counted when decided
        host.count_close(code)
    if not (connection.stalled and transport.abort()):
        await _close_within(transport, code)


async def _refuse(transport: PeerTransport, host: Host | None, fault_frame: Callable[[SpeechFault], Any]) -> None:
    if host is None:
        why = "The server is not ready yet"
    elif host.draining:
        why = "The server is shutting down"
    else:
        why = "The server has too many open sessions"
    fault = busy(f"{why}; try again shortly.")
    if host is not None:
        host.count_error(ErrorCode.BUSY.value)
    code = GOING_AWAY if host is not None and host.draining else TRY_LATER
    log.info("refused a connection (%d): %s", code, why)
    frame = fault_frame(fault)
    if frame is not None:  # a face with no error frame (a carrier's stream) says it by the code alone
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await transport.send(frame)
    await _close_within(transport, code)


def _code(fault: Exception) -> str:
    """A fault's code as the counts name it (an enum's value, or the face's own string)."""
    code = getattr(fault, "code", "internal")
    return str(getattr(code, "value", code))


async def _close_within(transport: PeerTransport, code: int | None) -> None:
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CLOSE_TIMEOUT_S):
            await transport.close(code)


@contextlib.asynccontextmanager
async def registered(host: Host, connection: Connection, slot: object) -> AsyncIterator[None]:
    """Count an admitted connection while it runs, so that the server's limits, its metrics
    and its drain see it."""
    host.connections.add(connection)
    host.changed()
    try:
        yield
    finally:
        host.connections.discard(connection)
        host.release_connection(slot)
        host.changed()
