"""An ASGI app served by uvicorn in a background thread, for tests, benchmarks and the demo.

Shared by the speech server and the agent, which must not import each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from starlette.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

log = logging.getLogger(__name__)


class _ClientStalled(Exception):
    """One body chunk did not leave within the send timeout (a TimeoutError of the body's
    own work is not this, and is not taken for it)."""


class BoundedStreamingResponse(StreamingResponse):
    """A streaming response whose every body chunk must leave within ``send_timeout_s``, and
    whose body generator is closed at once however the response ends (Starlette leaves an
    interrupted one to the garbage collector, and with it the work it consumes).

    A client that stays connected and reads nothing would otherwise hold its answer (a
    request's queue slot, an agent's LLM and speech session) for as long as it likes: the
    response is dropped, logged once with ``stalled_what``, and so is its connection where
    the server offers :data:`ABORT` (:class:`HttpToolsWithTransport`): a graceful close would
    wait for the unread bytes to leave, that is until the client hangs up."""

    stalled_what = "a response"

    def __init__(self, content: AsyncIterator[bytes], send_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self.send_timeout_s = send_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_within_timeout(message: Message) -> None:
            try:
                async with asyncio.timeout(self.send_timeout_s):
                    await send(message)
            except TimeoutError:
                raise _ClientStalled from None

        try:
            await super().__call__(scope, receive, send_within_timeout)
        except _ClientStalled:
            log.warning("dropping %s whose client took nothing for %g s", self.stalled_what, self.send_timeout_s)
            if abort_connection(scope):
                # One turn of the loop delivers the connection's loss to uvicorn before this
                # app returns, so that it does not also log an unfinished response.
                await asyncio.sleep(0)
        finally:
            await self.body_iterator.aclose()  # type: ignore[attr-defined]


def cap_send_buffer(sock: Any, size: int | None) -> None:
    """Fix ``sock``'s kernel send buffer at ``size`` bytes (Linux doubles it); ``None`` leaves
    it to autotuning. On a listening socket, every connection it accepts inherits it.

    Why: an answer's frames leave the server's own send queue as fast as the kernel takes
    them, so a send only blocks, and ``--send-timeout`` only starts, once the kernel's buffer
    is full; autotuned on a fast path it holds about a minute of pcm16."""
    if size is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)


WRITE_BUFFER = "voicestream.write_buffer"
"""The scope extension through which a WebSocket route reads how many bytes wait in the
server's own buffer for the peer (``scope["extensions"][WRITE_BUFFER]["size"]()``)."""

ABORT = "voicestream.abort"
"""The scope extension through which a WebSocket route or an HTTP response drops its
connection at once (``scope["extensions"][ABORT]["abort"]()``; :func:`abort_connection`)."""

END_UNFINISHED = "voicestream.end_unfinished"
"""The scope extension through which an HTTP response's connection closes once what was
written is sent, without the body's last chunk (:func:`end_unfinished`)."""


def drop_now(transport: asyncio.BaseTransport) -> None:
    """Close ``transport`` at once: its unsent bytes are discarded and the peer gets a reset.

    Why: a peer that stopped reading never takes a close frame, so a graceful close holds
    the connection (a route's coroutine, a drain, the server's shutdown) until its timeout,
    and even an abort leaves the kernel trying to deliver the bytes it buffered to a peer
    that takes none; a zero linger time makes the kernel drop them with the socket."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def abort_connection(scope: Scope) -> bool:
    """Drop the connection of the WebSocket or HTTP ``scope`` now (:func:`drop_now`) where
    the server offers :data:`ABORT`; False where it does not (the caller then closes as
    usual)."""
    abort = scope.get("extensions", {}).get(ABORT)
    if abort is None:
        return False
    abort["abort"]()
    return True


def end_unfinished(scope: Scope) -> bool:
    """Close the connection of the HTTP ``scope`` once what was written is sent, without the
    body's last chunk, so that its client reads an unfinished body, never a whole short one
    (a stream the drain cut, `voicestream.edge.drain`); False where the server does not offer
    :data:`END_UNFINISHED`."""
    end = scope.get("extensions", {}).get(END_UNFINISHED)
    if end is None:
        return False
    end["end"]()
    return True


class WebSocketsWithTransport(WebSocketsSansIOProtocol):
    """uvicorn's ``websockets-sansio`` protocol that also offers the routes two scope
    extensions over its transport. :data:`WRITE_BUFFER`: a send returns while what it wrote
    still fits below the transport's high-water mark, so a send that blocks may come seconds
    after the peer took its last byte; the connection times its send timeout from that byte
    (`server.connection`). :data:`ABORT`: a peer that read nothing for the send timeout is
    dropped at once instead of being sent a close it never takes."""

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        scope = getattr(self, "scope", None)
        if scope is not None:
            scope["extensions"][WRITE_BUFFER] = {"size": self.transport.get_write_buffer_size}
            scope["extensions"][ABORT] = {"abort": lambda: drop_now(self.transport)}


class HttpToolsWithTransport(HttpToolsProtocol):
    """uvicorn's ``httptools`` protocol that offers each request :data:`ABORT`: a streamed
    response whose client read nothing for the send timeout drops its connection at once
    (:class:`BoundedStreamingResponse`) instead of leaving it open until the client hangs up;
    and :data:`END_UNFINISHED`: a stream the drain cut ends without its last chunk."""

    def on_message_begin(self) -> None:
        super().on_message_begin()
        transport = self.transport
        extensions = self.scope.setdefault("extensions", {})
        extensions[ABORT] = {"abort": lambda: drop_now(transport)}
        extensions[END_UNFINISHED] = {"end": transport.close}


CONNECTION_PROTOCOLS: dict[str, Any] = {"http": HttpToolsWithTransport, "ws": WebSocketsWithTransport}
"""uvicorn's ``http`` and ``ws`` settings of every server here (the speech server, the agent)."""


class BoundedServer(uvicorn.Server):
    """uvicorn whose accepted connections each get a send buffer of ``send_buffer_bytes``."""

    def __init__(self, config: uvicorn.Config, send_buffer_bytes: int | None = None) -> None:
        super().__init__(config)
        self.send_buffer_bytes = send_buffer_bytes

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        for server in getattr(self, "servers", []):
            for sock in server.sockets:
                cap_send_buffer(sock, self.send_buffer_bytes)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


@contextmanager
def serving(config: uvicorn.Config, name: str, send_buffer_bytes: int | None = None) -> Iterator[str]:
    """Run ``config``'s app until the block ends; yields its base URL once it listens."""
    server = BoundedServer(config, send_buffer_bytes)
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError(f"{name} failed to start")
            threading.Event().wait(0.02)
        yield f"http://{config.host}:{config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
