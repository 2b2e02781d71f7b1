"""A raw WebSocket peer for server tests: frames exactly as they cross the wire."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from websockets.asyncio.client import ClientConnection, connect

if TYPE_CHECKING:
    import httpx

WS_PATH = "/invocations-bidirectional-stream"
JSON_TYPE = {"Content-Type": "application/json"}
"""For a raw body (`content=`): the server reads only JSON-typed bodies (voicestream.access)."""


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://") + WS_PATH


@dataclass
class Answer:
    """Everything the server sent for one request."""

    request_id: str | None
    frames: list[dict[str, Any]] = field(default_factory=list)
    audio: bytearray = field(default_factory=bytearray)
    audio_frames: int = 0
    first_audio_at: float | None = None

    @property
    def kinds(self) -> list[str]:
        return [f["type"] for f in self.frames]

    @property
    def last(self) -> dict[str, Any]:
        return self.frames[-1]


class WirePeer:
    """Sends JSON as text or binary frames and reads answers back frame by frame."""

    def __init__(self, ws: ClientConnection, binary: bool = False) -> None:
        self.ws = ws
        self.binary = binary
        self.sent_at: dict[str, float] = {}

    @classmethod
    async def open(cls, base_url: str, binary: bool = False) -> WirePeer:
        return cls(await connect(ws_url(base_url), max_size=None), binary)

    async def send(self, message: dict[str, Any] | str | bytes) -> None:
        if isinstance(message, dict):
            text = json.dumps(message)
            if "request_id" in message:
                self.sent_at[message["request_id"]] = time.monotonic()
            await self.ws.send(text.encode() if self.binary else text)
        else:
            await self.ws.send(message)

    async def answer(self, timeout: float = 60) -> Answer:
        """Read one request's frames: up to its complete / error / cancelled frame."""
        answer = Answer(None)
        async with asyncio.timeout(timeout):
            while True:
                frame = await self.ws.recv()
                if isinstance(frame, bytes):
                    if answer.first_audio_at is None:
                        answer.first_audio_at = time.monotonic()
                    answer.audio += frame
                    answer.audio_frames += 1
                    continue
                data = json.loads(frame)
                answer.frames.append(data)
                answer.request_id = data.get("request_id")
                if data["type"] in ("synthesis_complete", "error", "synthesis_cancelled"):
                    return answer

    async def close(self) -> None:
        await self.ws.close()


async def metric(base_url: str, name: str) -> float:
    """One value of the server's /metrics: ``name`` with its labels, as the server writes
    them (``voicestream_errors_total{code="busy"}``); a labelled series not counted yet is 0."""
    async with _metrics_client() as client:
        return await _read_metric(client, base_url, name)


def _metrics_client() -> httpx.AsyncClient:
    import httpx

    return httpx.AsyncClient(verify=loopback_tls())


@functools.cache
def loopback_tls() -> ssl.SSLContext:
    """httpx's default TLS context, made once per process, for clients made again and again
    (``verify=loopback_tls()``): httpx makes one per client by default, loading the CA bundle
    (23 ms of CPU each), and a wait that polled /metrics every `POLL_S` with a new client
    spent 40 % of a core on it. The servers here speak plain HTTP on 127.0.0.1."""
    return ssl.create_default_context()


async def _read_metric(client: httpx.AsyncClient, base_url: str, name: str) -> float:
    text = (await client.get(f"{base_url}/metrics")).text
    values = [line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")]
    if not values and "{" in name:
        return 0.0
    return float(values[0])


POLL_S = 0.05


async def until_above(base_url: str, name: str, value: float, timeout_s: float = 60) -> None:
    """Wait until the server's own ``name`` (as `metric` reads it) is above ``value``."""
    async with asyncio.timeout(timeout_s), _metrics_client() as client:
        while await _read_metric(client, base_url, name) <= value:
            await asyncio.sleep(POLL_S)


async def until_zero(base_url: str, *names: str, timeout_s: float = 60) -> None:
    """Wait until every one of the server's ``names`` is 0 at once (an empty queue, no piece
    rendering, no session open...)."""
    async with asyncio.timeout(timeout_s), _metrics_client() as client:
        while any([await _read_metric(client, base_url, name) for name in names]):
            await asyncio.sleep(POLL_S)


async def connect_non_reader(base_url: str) -> socket.socket:
    """A TCP connection to the server that takes as little as TCP allows: a 4 KB receive
    buffer and a 536-byte segment size. The segment size matters more: Linux grows the
    server's send buffer from the peer's segment size, to megabytes on loopback otherwise,
    so the server's sends back up after a few hundred kilobytes instead of four megabytes."""
    address = urlsplit(base_url)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    if hasattr(socket, "TCP_MAXSEG"):  # without it the server's sends back up later, not never
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (address.hostname, address.port))
    return sock


TCP_ESTABLISHED = 1
"""`tcp_info`'s first byte, the connection's state, while both ends hold it open (Linux)."""


async def until_dropped(peer: socket.socket | ClientConnection, timeout_s: float = 60) -> None:
    """Wait until the server has dropped ``peer``'s connection (a socket, or a WebSocket
    client's): its state, as the kernel of this end keeps it, is no longer established (a
    reset, or a close once every byte left). The peer never reads, so a server that only
    sends a close holds it forever."""
    sock = peer.transport.get_extra_info("socket") if isinstance(peer, ClientConnection) else peer
    async with asyncio.timeout(timeout_s):
        while sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0] == TCP_ESTABLISHED:
            await asyncio.sleep(POLL_S)


async def open_non_reader(base_url: str, address: str | None = None) -> ClientConnection:
    """A WebSocket client on `connect_non_reader`'s connection to ``base_url``, at ``address``
    (the session's route unless given), with no compression, one frame of queue and no
    keepalive pings (their pongs would go unread, and this end would close first): until it
    reads, the server's sends back up soon."""
    sock = await connect_non_reader(base_url)
    return await connect(address or ws_url(base_url), sock=sock, max_size=None, max_queue=1, compression=None,
                         ping_interval=None)


@contextlib.contextmanager
def serve_process(model_dir: object, *flags: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """A real `voicestream serve` process on a free 127.0.0.1 port, ready (``/ping`` 200);
    killed when the block ends if it is still running."""
    import httpx

    from voicestream.server import free_port

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "voicestream.cli", "serve", "--port", str(port), *flags,
         "--model-dir", str(model_dir), "--log-level", "warning"],
        env={**os.environ, "VOICESTREAM_OFFLINE": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/ping", timeout=1, verify=loopback_tls()).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, "the server exited while starting"
            time.sleep(0.2)
        yield process, url
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
