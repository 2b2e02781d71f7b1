"""A session straight to the speech server over its WebSocket route."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import (
    ConnectionClosedError,
    ConnectionClosedOK,
    InvalidHandshake,
    InvalidStatus,
)

from voicestream.client.errors import ConnectionLostError, ServerError, error_from_http
from voicestream.client.transport import AudioFrame, ControlFrame, Frame, Transport, bearer
from voicestream.protocol import decode_control_frame

SESSION_PATH = "/invocations-bidirectional-stream"
MAX_FRAME_BYTES = 16 * 1024 * 1024
"""Audio frames are a fraction of a second each; this only guards against a runaway peer."""


def session_url(url: str) -> str:
    """The WebSocket URL of the session route, from it or from the server's base URL.

    `http://host:8080` and `ws://host:8080` both become
    `ws://host:8080/invocations-bidirectional-stream`; a URL with a path is kept as it is.
    """
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    if scheme not in ("ws", "wss"):
        raise ValueError(f"not an http(s) or ws(s) URL: {url!r}")
    path = parts.path if parts.path not in ("", "/") else SESSION_PATH
    return urlunsplit((scheme, parts.netloc, path, parts.query, ""))


class WebSocketTransport(Transport):
    """Text frames from the server are control, binary frames audio (PROTOCOL.md 1.1).

    With `send_binary=True` every JSON message goes out as a binary frame, the way a
    SageMaker endpoint forwards a client's payloads to its container; the server must
    answer both kinds alike, and this is how tests show that it does.

    `api_key` is sent as `Authorization: Bearer KEY` on the handshake (never in the URL).
    """

    def __init__(
        self,
        url: str,
        send_binary: bool = False,
        *,
        open_timeout: float = 10.0,
        api_key: str | None = None,
    ) -> None:
        self.url = session_url(url)
        self.send_binary = send_binary
        self._open_timeout = open_timeout
        self._headers = bearer(api_key)
        self._connection: ClientConnection | None = None

    async def connect(self) -> None:
        try:
            self._connection = await connect(
                self.url,
                max_size=MAX_FRAME_BYTES,
                open_timeout=self._open_timeout,
                additional_headers=self._headers,
            )
        except InvalidStatus as exc:
            raise error_from_http(exc.response.status_code, exc.response.body or b"") from exc
        except (OSError, TimeoutError, InvalidHandshake) as exc:
            raise ConnectionLostError(f"cannot connect to {self.url}: {exc}") from exc

    async def send(self, message: Mapping[str, Any]) -> None:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        try:
            await self._open().send(text.encode("utf-8") if self.send_binary else text)
        except (ConnectionClosedOK, ConnectionClosedError) as exc:
            raise ConnectionLostError(f"the session to {self.url} is closed: {exc}") from exc

    async def receive(self) -> Frame | None:
        try:
            data = await self._open().recv()
        except ConnectionClosedOK:
            return None
        except ConnectionClosedError as exc:
            raise ConnectionLostError(f"the session to {self.url} broke: {exc}") from exc
        if isinstance(data, bytes):
            return AudioFrame(data)
        message = decode_control_frame(data.encode("utf-8"))
        if message is None:
            raise ServerError("the server sent a text frame that is not a JSON object")
        return ControlFrame(message)

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()

    def reopen(self, url: str | None = None) -> WebSocketTransport:
        fresh = copy.copy(self)
        fresh.url = session_url(url) if url else self.url
        fresh._connection = None
        return fresh

    def _open(self) -> ClientConnection:
        if self._connection is None:
            raise RuntimeError("the transport is not connected; call connect() first")
        return self._connection
