"""Every connection the server accepts has a fixed kernel send buffer (``--send-buffer-bytes``).

Left to autotuning, a loopback connection's send buffer grew to about 3 MB (a minute of
pcm16) before a frame to a peer that stopped reading blocked, so ``--send-timeout`` began
that minute late (``bench chaos``, issue 27). The server runs in this process here, so its
side of each connection is found among this process's own descriptors and asked directly.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import pytest

from voicestream.asgi import free_port

SEND_BUFFER = 65_536


def server_side_send_buffer(client: socket.socket) -> int:
    """SO_SNDBUF of the server's end of ``client``'s connection (Linux reports twice what was set)."""
    want = (client.getpeername(), client.getsockname())
    for name in os.listdir("/proc/self/fd"):
        try:
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue  # not a socket
        with sock:
            try:
                if sock.type == socket.SOCK_STREAM and (sock.getsockname(), sock.getpeername()) == want:
                    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
            except OSError:
                continue  # a listening or unconnected socket
    raise AssertionError("the server's end of the connection was not found")


def accepted_send_buffer(port: int) -> int:
    """SO_SNDBUF of the server's end of a new connection to ``port`` on 127.0.0.1, once the
    server's loop has accepted it (polled, at most 10 s)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        deadline = time.monotonic() + 10
        while True:
            try:
                return server_side_send_buffer(client)
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)


@pytest.fixture
def ports(make_speech_server: Callable[..., str]) -> dict[str, int]:
    wyoming = free_port()
    url = make_speech_server(send_buffer_bytes=SEND_BUFFER, wyoming_port=wyoming)
    return {"http and websocket": urlsplit(url).port or 0, "wyoming": wyoming}


@pytest.mark.parametrize("listener", ["http and websocket", "wyoming"])
def test_each_accepted_connection_has_the_configured_send_buffer(ports: dict[str, int], listener: str) -> None:
    assert accepted_send_buffer(ports[listener]) == 2 * SEND_BUFFER
