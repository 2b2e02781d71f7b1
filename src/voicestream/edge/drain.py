"""One drain for both servers: what SIGTERM does to the work under way, and how long it takes.

The signal stops admission (`/ping` answers 503, new work is refused `busy`), then:

1. **grace** (``--grace-s``): accepted work may finish. A connection (a speech session, a
   Realtime socket) with nothing left to send goes away at once (1001), and the drain ends
   as soon as nothing is left. It waits on the edge's events, not on a clock: every message a
   connection sends or receives, and every connection's end, wakes it (:class:`DrainWatch`).
2. **cut**, if the grace ran out: every connection still open goes away (1001); the server
   ends what it still holds, telling each why where the wire has a way (the speech server
   fails every unfinished request ``busy``: a session's error frame, an SSE stream's error
   event); and every HTTP stream still being sent ends without its last chunk, so that no
   client takes a cut answer for a whole one.
3. **close** (:data:`CLOSE_S`): connections and streams get this long to leave; a stream
   left then is dropped.

uvicorn then shuts down and the process exits (:class:`DrainingServer`), at the latest
:data:`SHUTDOWN_S` after the close, whatever still runs: a render that cannot be stopped is
abandoned, not waited for. Signal to exit is at most ``grace + CLOSE_S + SHUTDOWN_S``, on
any machine; the Helm chart's ``terminationGracePeriodSeconds`` adds the preStop sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Collection
from concurrent.futures.thread import _worker
from dataclasses import dataclass
from types import FrameType
from typing import NoReturn, Protocol

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from voicestream.asgi import BoundedServer, abort_connection, end_unfinished

log = logging.getLogger(__name__)

CLOSE_S = 5.0
"""After the grace: how long the connections and streams it cut may take to leave."""
SHUTDOWN_S = 5.0
"""After the close: uvicorn's shutdown (:data:`UVICORN_SHUTDOWN_S` of it), the app's
lifespan and the exit. At its end the process exits, whatever still runs."""
UVICORN_SHUTDOWN_S = 2
"""uvicorn's ``timeout_graceful_shutdown``: by then the drain has closed every connection
it knows; what is left (an idle keep-alive, a close handshake) is cancelled."""
EXITED_ON_SIGNAL = 128
"""Added to the signal's number: the status of a process the signal ended, as a shell says
it (143 for SIGTERM), where the process cannot end by the signal itself."""


def exit_deadline_s(grace_s: float) -> float:
    """The most a server takes from SIGTERM to its exit."""
    return grace_s + CLOSE_S + SHUTDOWN_S


class GoesAway(Protocol):
    """What the drain needs of an open connection (a speech session, a Realtime socket)."""

    @property
    def idle(self) -> bool: ...

    def go_away(self) -> None: ...


class _Wakeup:
    """A wake-up that any thread may give and any loop may wait for: a drain can run on
    another loop than the server's (tests drain a server running in a thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def armed(self) -> asyncio.Future[None]:
        """A future that the next wake-up resolves; armed before looking, so that no change
        made after the look is missed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            self._waiters.append((loop, future))
        return future

    def wake(self) -> None:
        if not self._waiters:  # nobody drains: the common case, without the lock
            return
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits
                loop.call_soon_threadsafe(_resolve, future)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@dataclass(eq=False)
class _Stream:
    """An HTTP response being streamed (its size unknown when it starts), as the drain sees it."""

    scope: Scope
    loop: asyncio.AbstractEventLoop
    cut: bool = False
    """Cut by the drain: its body's last chunk is never sent (`voicestream.asgi.end_unfinished`)."""


class Drain:
    """The waits of one server's drain, and the edge's view of its streams (:class:`DrainWatch`)."""

    def __init__(self) -> None:
        self._wakeup = _Wakeup()
        self.streams: set[_Stream] = set()
        """HTTP responses being streamed now."""
        self.cutting = False
        """The grace ran out: every stream being sent, or starting now, is cut."""

    def changed(self) -> None:
        """Something a drain waits on may have changed (safe from any thread)."""
        self._wakeup.wake()

    async def run(
        self, grace_s: float, connections: Collection[GoesAway], drained: Callable[[], bool],
        end: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Let the work under way finish within ``grace_s``, then cut and close what is left
        (the module's steps). ``connections`` are the server's live set; ``drained`` says that
        nothing accepted is left; ``end`` ends what the server holds at the cut, telling each
        why (None: the server has no way to; its HTTP streams end unfinished at once)."""

        def finished() -> bool:
            for connection in list(connections):
                if connection.idle:
                    connection.go_away()
            return drained()

        if not await self._until(grace_s, finished):
            log.warning("grace period of %g s over: cutting %d connections and %d HTTP streams",
                        grace_s, len(connections), len(self.streams))
            for connection in list(connections):
                connection.go_away()
            self.cutting = True
            streams = list(self.streams)
            for stream in streams:
                stream.cut = True
            if end is not None:
                await end()
            else:
                for stream in streams:
                    _on_its_loop(stream, end_unfinished)
        if not await self._until(CLOSE_S, lambda: not connections and not self.streams):
            log.warning("dropping %d connections and %d HTTP streams that did not close within %g s",
                        len(connections), len(self.streams), CLOSE_S)
            for stream in list(self.streams):
                _on_its_loop(stream, abort_connection)

    async def _until(self, timeout_s: float, done: Callable[[], bool]) -> bool:
        """Whether ``done`` held within ``timeout_s``, asked again at every change."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                while True:
                    changed = self._wakeup.armed()
                    if done():
                        changed.cancel()
                        return True
                    await changed
        return False


def _on_its_loop(stream: _Stream, action: Callable[[Scope], bool]) -> None:
    with contextlib.suppress(RuntimeError):  # its loop is closed: so is its connection
        stream.loop.call_soon_threadsafe(action, stream.scope)


class DrainWatch:
    """The edge's side of the drain, around a whole app: every message a connection sends or
    receives, and every connection's end, wakes the drain (any of them may have made a
    connection idle or the server drained); an HTTP stream the drain cut ends without its
    last chunk."""

    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self.app = app
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        drain = self.drain
        stream: _Stream | None = None

        async def watched_receive() -> Message:
            message = await receive()
            drain.changed()
            return message

        async def watched_send(message: Message) -> None:
            nonlocal stream
            if message["type"] == "http.response.start" and not _has_length(message):
                stream = _Stream(scope, asyncio.get_running_loop(), cut=drain.cutting)
                drain.streams.add(stream)
            elif _ends_body(message) and stream is not None and stream.cut:
                await _ended_unfinished(scope, receive)
                return
            await send(message)
            drain.changed()

        try:
            await self.app(scope, watched_receive, watched_send)
        finally:
            if stream is not None:
                drain.streams.discard(stream)
            drain.changed()


def _ends_body(message: Message) -> bool:
    return message["type"] == "http.response.body" and not message.get("more_body", False)


def _has_length(start: Message) -> bool:
    """The response's size is known (``Content-Length``): it is sent whole, not streamed."""
    return any(name.lower() == b"content-length" for name, _ in start.get("headers", ()))


async def _ended_unfinished(scope: Scope, receive: Receive) -> None:
    """End a cut stream's connection without its last chunk, and wait (within the close) for
    the connection's loss, so that the server takes the response as given up, not as an
    app that forgot to finish it."""
    if not end_unfinished(scope):
        return
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(CLOSE_S):
            while (await receive())["type"] != "http.disconnect":
                pass


class DrainingServer(BoundedServer):
    """uvicorn that drains before it shuts down, and exits within :func:`exit_deadline_s`.

    On the first SIGTERM (what Docker, Kubernetes, SageMaker and AgentCore send) or Ctrl-C,
    ``drain`` runs while the server still listens (so ``/ping`` can answer 503 and in-flight
    work can finish); uvicorn's own shutdown follows when it returns. A second signal stops
    at once.

    The exit does not wait for threads: once uvicorn is done the process ends by the signal
    it got (or with status 128 + the signal where that cannot end it: the kernel ignores it
    for a container's PID 1, or the process was started ignoring it), abandoning any render
    still in the engine, which the interpreter's exit would otherwise wait for. A watchdog
    started at the first signal ends the process the same way at the deadline, whatever the
    server is doing by then.
    """

    def __init__(
        self, config: uvicorn.Config, drain: Callable[[], Awaitable[None]], grace_s: float,
        send_buffer_bytes: int | None = None,
    ) -> None:
        super().__init__(config, send_buffer_bytes)
        graceful_s = config.timeout_graceful_shutdown
        config.timeout_graceful_shutdown = min(graceful_s or UVICORN_SHUTDOWN_S, UVICORN_SHUTDOWN_S)
        self._drain = drain
        self.deadline_s = exit_deadline_s(grace_s)
        self._ignored = {
            sig for sig in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(sig) == signal.SIG_IGN
        }
        """Signals the process was started ignoring: it cannot end by them."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining: asyncio.Task[None] | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self._captured_signals:  # the first signal: the deadline runs from now
            when = f"at the {self.deadline_s:g} s deadline"
            watchdog = threading.Timer(self.deadline_s, _exit_now, (sig, when, True))
            watchdog.daemon = True
            watchdog.start()
        if self._draining is not None or self._loop is None or self.should_exit:
            super().handle_exit(sig, frame)
            return
        self._captured_signals.append(sig)
        self._loop.call_soon_threadsafe(self._start_draining)

    def _start_draining(self) -> None:
        assert self._loop is not None
        self._draining = self._loop.create_task(self._drain_then_exit(), name="drain")

    async def _drain_then_exit(self) -> None:
        try:
            await self._drain()
        except Exception:
            log.exception("draining failed; shutting down now")
        finally:
            self.should_exit = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await super().shutdown(sockets)
        if self._captured_signals:
            sig = self._captured_signals[-1]
            _exit_now(sig, "once shut down", by_signal=sig not in self._ignored)


REPORT_S = 1.0
"""The most the exit waits for its report to be logged (a log stream may be stuck too)."""


def _exit_now(sig: int, when: str, overran: bool = False, by_signal: bool = True) -> NoReturn:
    """End the process now, abandoning the threads still at work (renders in the engine: the
    interpreter's exit would join them), counted in one log line: ``by_signal``, from the main
    thread, by ``sig`` itself; else, or where the kernel ignores it (a container's PID 1),
    with status 128 + ``sig``. ``overran``: the watchdog ends a shutdown that reached its
    deadline (always logged)."""
    reporting = threading.Thread(
        target=_report_abandoned, args=(when, overran), name="exit-report", daemon=True
    )
    reporting.start()
    reporting.join(REPORT_S)
    if by_signal and threading.current_thread() is threading.main_thread():
        signal.signal(sig, signal.SIG_DFL)
        signal.raise_signal(sig)
    os._exit(EXITED_ON_SIGNAL + sig)


def _report_abandoned(when: str, overran: bool) -> None:
    """Log once the threads left at work, if any (or the deadline was reached), and flush
    every log handler."""
    here, main = threading.current_thread(), threading.main_thread()
    frames = sys._current_frames()
    left = [
        thread.name for thread in threading.enumerate()
        if thread not in (here, main) and not thread.daemon and not _idle_worker(frames.get(thread.ident))
    ]
    if left or overran:
        log.warning("exiting %s; %d threads still at work (renders in the engine) are abandoned: %s",
                    when, len(left), ", ".join(left) or "none")
    logging.shutdown()


def _idle_worker(frame: FrameType | None) -> bool:
    """The thread is an executor's worker waiting for work (its innermost Python frame is the
    worker loop itself, blocked on its queue): the exit loses nothing by not waiting for it."""
    return frame is not None and frame.f_code is _worker.__code__
