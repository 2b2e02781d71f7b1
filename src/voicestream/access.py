"""Access control shared by the speech server and the agent: an optional API key and CORS.

Without a key every route is open (the default on 127.0.0.1 and behind IAM on AWS). With one,
every HTTP request and WebSocket handshake must carry it, except the health check and the
static pages (which hold no secret and must load before a page can send the key):

- ``Authorization: Bearer KEY`` (HTTP and the WebSocket handshake);
- ``X-API-Key: KEY`` (what Cartesia's clients send: pipecat, LiveKit);
- ``?key=KEY`` in the URL (what the browser pages use: a page opened as ``/?key=KEY`` passes
  its own key on);
- the WebSocket subprotocol ``voicestream.key.KEY`` (browsers cannot set headers on a
  WebSocket); the server then answers with the subprotocol ``voicestream``, which the
  client must offer beside it.

Keys are compared in constant time; a missing or wrong key is answered 401 (HTTP) or by
closing the handshake with 1008 (WebSocket) before the app sees the request.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Sequence
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

KEY_SUBPROTOCOL_PREFIX = "voicestream.key."
SUBPROTOCOL = "voicestream"
OPEN_PATHS = frozenset({"/ping", "/favicon.ico"})
OPEN_PREFIXES = ("/web/", "/static/")
"""Static pages and their assets: open, so that a page can load and then send the key."""


def presented_key(scope: Scope) -> str | None:
    """The key a request carries, in any of the accepted forms."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
        if name == b"x-api-key" and value.strip():
            return value.decode("latin-1").strip()
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    if query.get("key"):
        return query["key"][0]
    for protocol in scope.get("subprotocols", ()):
        if protocol.startswith(KEY_SUBPROTOCOL_PREFIX):
            return protocol[len(KEY_SUBPROTOCOL_PREFIX):]
    return None


def accepted_subprotocol(scope: Scope) -> str | None:
    """The subprotocol a WebSocket is accepted with: ``voicestream`` when offered."""
    return SUBPROTOCOL if SUBPROTOCOL in scope.get("subprotocols", ()) else None


def is_open_path(path: str) -> bool:
    return path in OPEN_PATHS or path == "/" or path.endswith(".html") or path.startswith(OPEN_PREFIXES)


class ApiKeyMiddleware:
    """Refuses HTTP requests and WebSocket handshakes that lack the key (pure ASGI)."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        if not api_key:
            raise ValueError("an empty API key would let everyone in")
        self.app = app
        self._key = api_key.encode()

    def _allowed(self, scope: Scope) -> bool:
        key = presented_key(scope)
        return key is not None and hmac.compare_digest(key.encode(), self._key)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or is_open_path(scope["path"]) or self._allowed(scope):
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": "unauthorized"})
        else:
            body = json.dumps(
                {"error": {"code": "unauthorized", "message": "A valid API key is required."}}
            ).encode()
            await send({
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ],
            })
            await send({"type": "http.response.body", "body": body})


def protect(app: Starlette, api_key: str | None, cors_origins: Sequence[str]) -> None:
    """Put ``app`` behind the key check (when a key is set) and CORS for ``cors_origins``
    (outside the key check, so that a browser's preflight, which carries no key, is answered)."""
    if api_key:
        app.add_middleware(ApiKeyMiddleware, api_key=api_key)
    if cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type", "Accept", "X-API-Key", "Cartesia-Version"],
        )
