"""The one access policy of the speech server and the agent, applied to every route.

A server on 127.0.0.1 is reachable from every web page the user opens, so four checks run
before the app sees a request (one pure ASGI middleware, `AccessMiddleware`):

1. **Host** (DNS rebinding): the ``Host`` header must name this server: ``localhost``,
   ``127.0.0.1``, ``::1``, the address the request arrived on, or a name given with
   ``--allowed-host`` (``*``: any name, for a container behind a load balancer, SageMaker
   or AgentCore, where the name the caller used is not known in advance). A page on
   ``evil.example`` whose name was re-pointed at 127.0.0.1 sends ``Host: evil.example``
   and is refused with 403 ``forbidden``. ``/ping`` is exempt: health checkers send
   their own Host.
2. **Origin** (WebSocket handshakes only; browsers do not apply CORS to WebSockets): a
   handshake with an ``Origin`` header must come from the server's own origin (the
   Origin's host and port are the request's ``Host``) or a ``--cors-origin``; no Origin
   header is a client that is not a browser, and is let in. A refused handshake is
   closed with 1008 before it is accepted (the client sees HTTP 403).
3. **API key** (when one is set): ``Authorization: Bearer KEY`` (or ``Token KEY``, Deepgram's), ``X-API-Key: KEY`` (what
   Cartesia's clients send: pipecat, LiveKit) or ``xi-api-key: KEY`` (ElevenLabs') on any request, or on a
   WebSocket handshake the subprotocol ``voicestream.key.KEY`` (browsers cannot set
   headers on a WebSocket; the server then answers with the subprotocol ``voicestream``,
   which the client must offer beside it). Keys never travel in URLs: a ``?key=`` is
   refused with a message saying so, and logged URLs have their query values redacted
   (`RedactQueryValues`). Compared in constant time; a missing or wrong key gets 401
   ``unauthorized`` (HTTP) or a 1008 close (WebSocket). Only `OPEN_PATHS` and the pages'
   files need none, and a phone carrier's routes (``signed_prefixes``), which check the
   carrier's own signature instead (and take its form-encoded webhooks).
4. **JSON bodies**: a POST, PUT or PATCH must say ``Content-Type: application/json`` (or
   a ``+json`` type). A browser sends a cross-site ``text/plain``, form or untyped body
   without asking first (a CORS "simple request"), so any page could otherwise spend the
   user's LLM credits through the agent; an ``application/json`` body needs a preflight,
   which only ``--cors-origin`` origins pass. Others get 415 ``unsupported_media_type``.
   A body with no Content-Type at all and no Origin is accepted: that is a non-browser
   client (a SageMaker ``InvokeEndpoint`` without ``ContentType``, the original sample's
   callers), since a browser sends ``Origin`` with every cross-site POST; so is a
   ``multipart/form-data`` upload without an Origin to the routes of `UPLOAD_PATHS` (a
   pronunciation dictionary's file, as ElevenLabs' clients send it).

CORS (``--cors-origin``) wraps the policy from outside, so that a preflight, which carries
no key, is answered.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from voicestream.protocol import ErrorCode, ErrorFrame
from voicestream.web import STATIC_DIR

log = logging.getLogger(__name__)

KEY_SUBPROTOCOL_PREFIX = "voicestream.key."
SUBPROTOCOL = "voicestream"
HEALTH_PATH = "/ping"
OPEN_PATHS = frozenset(
    {HEALTH_PATH, "/"}
    | {f"/web/{path.relative_to(STATIC_DIR).as_posix()}" for path in STATIC_DIR.rglob("*") if path.is_file()}
)
"""Routes that need no key: the health check, the page and each of its files (which hold
no secret and must load before the page can send the key). Nothing else, whatever its name."""
LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
"""Host names always allowed: no rebinding makes a browser send them, only a URL that names
them, and a page of another site that calls one is stopped by the Origin, CORS and body checks."""
ANY_HOST = "*"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
KEY_IN_URL = ("Keys are not accepted in URLs (they end up in logs and browser history); send the "
              "header Authorization: Bearer KEY.")


@dataclass(frozen=True)
class AccessPolicy:
    """What the checks allow: the key (None: no key needed), the browser origins allowed
    from other sites (``*``: any), and the extra Host names (``*``: any)."""

    api_key: str | None = None
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    signed_prefixes: tuple[str, ...] = ()
    """Paths under these are a carrier's (the agent's ``/telephony/``): the route checks the
    carrier's own signature instead of the key, and takes the carrier's form bodies."""

    def __post_init__(self) -> None:
        if self.api_key is not None and not self.api_key:
            raise ValueError("an empty API key would let everyone in")


def parse_names(values: Iterable[str] | None) -> tuple[str, ...]:
    """Option or environment values as names: each may hold several, split by commas or
    spaces (``VOICESTREAM_ALLOWED_HOSTS="speech, localhost"``)."""
    return tuple(name for value in values or () for name in re.split(r"[,\s]+", value) if name)


def presented_key(scope: Scope) -> str | None:
    """The key a request carries: a Bearer, X-API-Key or xi-api-key header, or a WebSocket's key subprotocol."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() in ("bearer", "token") and token.strip():  # "Token": Deepgram's scheme
                return token.strip()
        if name in (b"x-api-key", b"xi-api-key") and value.strip():
            return value.decode("latin-1").strip()
    for protocol in scope.get("subprotocols", ()):
        if protocol.startswith(KEY_SUBPROTOCOL_PREFIX):
            return protocol[len(KEY_SUBPROTOCOL_PREFIX):]
    return None


def accepted_subprotocol(scope: Scope) -> str | None:
    """The subprotocol a WebSocket is accepted with: ``voicestream`` when offered."""
    return SUBPROTOCOL if SUBPROTOCOL in scope.get("subprotocols", ()) else None


def is_open_path(path: str) -> bool:
    return path in OPEN_PATHS


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == wanted:
            return value.decode("latin-1")
    return None


def _split_host(value: str) -> tuple[str, int | None]:
    """``Host`` as (lower-case name without brackets or trailing dot, port or None)."""
    try:
        parts = urlsplit(f"//{value.strip()}")
        name, port = parts.hostname or "", parts.port
    except ValueError:
        return "", None
    return name.rstrip("."), port


def _same_address(name: str, address: str) -> bool:
    try:
        return ipaddress.ip_address(name) == ipaddress.ip_address(address)
    except ValueError:
        return False


_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


UPLOAD_PATHS = frozenset({"/v1/pronunciation-dictionaries/add-from-file"})
"""Routes that take a file as ``multipart/form-data`` from a non-browser client."""


def _is_upload(path: str, content_type: str | None, origin: str | None) -> bool:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return origin is None and media == "multipart/form-data" and path in UPLOAD_PATHS


def _is_json(content_type: str | None) -> bool:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class AccessMiddleware:
    """Applies `AccessPolicy` to every HTTP request and WebSocket handshake (pure ASGI)."""

    def __init__(self, app: ASGIApp, policy: AccessPolicy) -> None:
        self.app = app
        self._key = policy.api_key.encode() if policy.api_key else None
        self._any_host = ANY_HOST in policy.allowed_hosts
        self._hosts = LOCAL_NAMES | {_split_host(name)[0] for name in policy.allowed_hosts}
        self._any_origin = ANY_HOST in policy.cors_origins
        self._origins = {origin.rstrip("/").lower() for origin in policy.cors_origins}
        self._signed = policy.signed_prefixes
        self._logged: set[tuple[str, str]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] == HEALTH_PATH:
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": refusal[0].value})
        else:
            await _send_error(send, *refusal)

    def _refusal(self, scope: Scope) -> tuple[ErrorCode, str, int] | None:
        """The first check the request fails, as (code, message, HTTP status)."""
        headers = scope.get("headers", ())
        hosts = [value.decode("latin-1") for name, value in headers if name == b"host"]
        for host in hosts:  # every one of them: a second Host header gets no further
            if not self._host_allowed(host, scope):
                self._log_once("Host", host, scope)
                message = f"Host {host!r} is not a name of this server (see --allowed-host)."
                return ErrorCode.FORBIDDEN, message, 403
        origin = _header(scope, b"origin")
        if scope["type"] == "websocket" and origin is not None and not self._origin_allowed(origin, hosts):
            self._log_once("Origin", origin, scope)
            return ErrorCode.FORBIDDEN, f"Origin {origin!r} may not open sessions (see --cors-origin).", 403
        if scope["path"].startswith(self._signed) and self._signed:
            return None  # the carrier's signature, checked by its route
        if self._key is not None and not is_open_path(scope["path"]) and not self._key_matches(scope):
            in_url = b"key=" in scope.get("query_string", b"")
            return ErrorCode.UNAUTHORIZED, KEY_IN_URL if in_url else "A valid API key is required.", 401
        if scope["type"] == "http" and scope["method"] in BODY_METHODS:
            content_type = _header(scope, b"content-type")
            untyped_non_browser = content_type is None and origin is None
            if not (_is_json(content_type) or untyped_non_browser or _is_upload(scope["path"], content_type, origin)):
                message = f"The body must be JSON, sent as Content-Type: application/json (not {content_type or 'none'})."
                return ErrorCode.UNSUPPORTED_MEDIA_TYPE, message, 415
        return None

    def _host_allowed(self, host: str, scope: Scope) -> bool:
        if self._any_host:
            return True
        name, _ = _split_host(host)
        server = scope.get("server")
        return name in self._hosts or (server is not None and _same_address(name, server[0]))

    def _origin_allowed(self, origin: str, hosts: list[str]) -> bool:
        if self._any_origin or origin.rstrip("/").lower() in self._origins:
            return True
        try:
            parts = urlsplit(origin)
            origin_port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
        except ValueError:
            return False
        if len(hosts) != 1 or not parts.hostname:
            return False
        name, port = _split_host(hosts[0])
        return parts.hostname == name and origin_port == (port or _DEFAULT_PORTS.get(parts.scheme))

    def _key_matches(self, scope: Scope) -> bool:
        key = presented_key(scope)
        return key is not None and self._key is not None and hmac.compare_digest(key.encode(), self._key)

    def _log_once(self, header: str, value: str, scope: Scope) -> None:
        """A WARNING the first time a Host or Origin is refused (one bad page retrying must
        not flood the log), DEBUG after; never the key, the query or other headers."""
        level = logging.DEBUG if (header, value) in self._logged else logging.WARNING
        if len(self._logged) < 1024:
            self._logged.add((header, value))
        kind = "WebSocket handshake" if scope["type"] == "websocket" else f"{scope['method']} request"
        log.log(level, "refused a %s to %s: %s %r is not allowed", kind, scope["path"], header, value)


async def _send_error(send: Send, code: ErrorCode, message: str, status: int) -> None:
    body = ErrorFrame(code=code.value, message=message).to_http_json().encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


_QUERY_VALUE = re.compile(r"([?&][^=&\s\"]*=)[^&\s\"]*")


class RedactQueryValues(logging.Filter):
    """Rewrites logged URLs' query values to ``...``: uvicorn's access log (and its
    WebSocket handshake lines) print each path with its query, where an old client may
    still put its key."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _QUERY_VALUE.sub(r"\1...", arg) if isinstance(arg, str) and "?" in arg else arg
                for arg in record.args
            )
        return True


def redact_uvicorn_logs() -> None:
    """Put `RedactQueryValues` on uvicorn's loggers (once)."""
    for name in ("uvicorn.access", "uvicorn.error"):
        logger = logging.getLogger(name)
        if not any(isinstance(existing, RedactQueryValues) for existing in logger.filters):
            logger.addFilter(RedactQueryValues())


def protect(app: Starlette, policy: AccessPolicy) -> None:
    """Put ``app`` behind the policy, with CORS for its ``cors_origins`` outside it."""
    redact_uvicorn_logs()
    app.add_middleware(AccessMiddleware, policy=policy)
    if policy.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(policy.cors_origins),
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=[
                "Authorization", "Content-Type", "Accept", "X-API-Key", "xi-api-key", "Cartesia-Version",
                "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id",  # the agent's conversation id (PROTOCOL.md 2)
            ],
        )

