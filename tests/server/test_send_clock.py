"""The send timeout runs from the last byte the peer took (issue 27's "never reads" row).

A send returns as soon as its bytes are in the server's own buffer below the transport's
high-water mark, so after a peer stops reading, the send that finally blocks can come a
whole render later, and a timeout counted from that send closed the peer seconds late. Here
a real `Connection` on the real uvicorn WebSocket protocol the server runs
(`WebSocketsWithTransport`), over loopback, sends until bytes wait in its buffer for a
peer that never reads; once they have waited the send timeout, the next frame is refused
without being handed to the socket at all. A peer that reads gets the same late frame. Both
checks are conditions (the frame was or was not written, the connection is or is not
closing), never a race: a peer that never reads takes nothing however slow the machine.
"""

from __future__ import annotations

import asyncio
import base64
import os
import queue
import time
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket
from tests.server.wire import connect_non_reader
from websockets.asyncio.client import connect

from voicestream.asgi import WebSocketsWithTransport, free_port, serving
from voicestream.edge.connection import (
    Connection,
    ConnectionState,
    SendTimedOut,
    WebSocketTransport,
)
from voicestream.engine import KokoroEngine
from voicestream.limits import SEND_BUFFER_BYTES
from voicestream.server import ServerSettings
from voicestream.speech.core import SpeechCore
from voicestream.speech.metrics import ServerMetrics

pytestmark = pytest.mark.timeout(120)

SEND_TIMEOUT_S = 1.0
FRAME = b"\x00" * 65_536
MAX_FRAMES = 200
"""Far more than a 128 KiB send buffer and a 4 KB receive window take."""


class _CountingTransport(WebSocketTransport):
    """The real transport, counting the frames handed to it."""

    sends = 0

    async def send(self, frame: Any) -> None:
        self.sends += 1
        await super().send(frame)


def _probe_app(service: SpeechCore, outcomes: queue.Queue[dict[str, Any]]) -> Starlette:
    async def probe(websocket: WebSocket) -> None:
        """Fill the buffer, wait the send timeout, then send one late frame."""
        await websocket.accept()
        transport = _CountingTransport(websocket)
        connection = Connection(transport, service, service.admit_connection())
        outcome: dict[str, Any] = {"offered": WebSocketsWithTransport.__name__}
        try:
            for _ in range(MAX_FRAMES):
                await connection.send_within(FRAME)
                if transport.unsent_bytes():
                    break
            outcome["held"] = transport.unsent_bytes()
            await asyncio.sleep(SEND_TIMEOUT_S * 1.5)  # the next render comes later than that
            before = transport.sends
            try:
                await connection.send_within(b"late")
                outcome["late"] = "sent"
            except SendTimedOut:
                outcome["late"] = "refused"
            outcome["handed_to_socket"] = transport.sends - before
            outcome["closing"] = connection.state is ConnectionState.CLOSING
        finally:
            outcomes.put(outcome)
            await websocket.close()

    return Starlette(routes=[WebSocketRoute("/probe", probe)])


@pytest.fixture(scope="module")
def probe(engine: KokoroEngine):
    service = SpeechCore(engine, ServerSettings(send_timeout_s=SEND_TIMEOUT_S), ServerMetrics())
    outcomes: queue.Queue[dict[str, Any]] = queue.Queue()
    config = uvicorn.Config(_probe_app(service, outcomes), host="127.0.0.1", port=free_port(),
                            ws=WebSocketsWithTransport, log_config=None, log_level="warning")
    with serving(config, "send-clock-probe", SEND_BUFFER_BYTES) as url:
        yield url, outcomes


async def test_a_late_frame_to_a_peer_that_took_nothing_for_the_send_timeout_is_refused_at_once(probe) -> None:
    """The peer sends its upgrade request and then reads nothing, not even the server's 101."""
    url, outcomes = probe
    sock = await connect_non_reader(url)
    try:
        await asyncio.get_running_loop().sock_sendall(sock, _upgrade_request(url))
        outcome = await asyncio.to_thread(outcomes.get, True, 60)
    finally:
        sock.close()
    assert outcome["held"] > 0, outcome
    assert outcome["late"] == "refused" and outcome["closing"], outcome
    assert outcome["handed_to_socket"] == 0, outcome


def _upgrade_request(url: str) -> bytes:
    host = url.removeprefix("http://")
    key = base64.b64encode(os.urandom(16)).decode()
    return (f"GET /probe HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()


async def test_a_late_frame_to_a_peer_that_reads_is_sent(probe) -> None:
    url, outcomes = probe
    received = 0
    started = time.monotonic()
    async with connect(url.replace("http://", "ws://") + "/probe", max_size=None, compression=None) as client:
        async for message in client:
            received += len(message)
            if message == b"late":
                break
        outcome = await asyncio.to_thread(outcomes.get, True, 60)
    assert outcome["late"] == "sent" and not outcome["closing"], (outcome, time.monotonic() - started)
    assert outcome["handed_to_socket"] == 1
    assert received >= len(FRAME)
