"""The phone carriers' routes: for each carrier a webhook that answers a call with the
carrier's markup, pointing it at the agent's media stream, and that stream.

``POST|GET /telephony/CARRIER`` (``twilio``, ``telnyx``, ``plivo``, ``vonage``) answers with
TwiML, TeXML, Plivo XML or a Vonage NCCO; ``WS /telephony/CARRIER/stream`` is the call
(`TelephonyCall`). Each request is checked as its carrier signs it (`signatures`) when the
carrier's secret is set, and refused with 403 otherwise (a stream: closed before it is
accepted, which the carrier sees as 403); without the secret the carrier's routes answer 404,
unless `TelephonySettings.insecure` lets them in unchecked. Twilio signs its stream's
handshake; the other carriers' streams must bring back the token the agent put in the stream
URL it answered the (signed) webhook with.

The URLs signed are the agent's public ones (`TelephonySettings.public_url`, as the carrier
called them through any proxy), else the request's own scheme and Host.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from voicestream.agent.service import AgentService
from voicestream.agent.settings import TelephonySettings
from voicestream.agent.telephony import signatures
from voicestream.agent.telephony.call import serve_call
from voicestream.agent.telephony.machine import CarrierMachine
from voicestream.agent.telephony.plivo import PlivoStream, plivo_xml
from voicestream.agent.telephony.telnyx import TelnyxStream, texml
from voicestream.agent.telephony.twilio import TwilioStream, twiml
from voicestream.agent.telephony.vonage import VonageStream, ncco
from voicestream.edge.connection import POLICY, WebSocketTransport

logger = logging.getLogger(__name__)

PREFIX = "/telephony/"
"""Every carrier route's path starts so: the access policy leaves them to their signatures."""
TOKEN_PARAM = "token"


@dataclass(frozen=True)
class Signed:
    """What a webhook request carries that a carrier's signature covers."""

    method: str
    url: str
    """The full URL as the carrier called it, query included."""
    form: list[tuple[str, str]]
    body: bytes
    headers: Any


def _xml(body: str) -> Response:
    return Response(body, media_type="application/xml")


@dataclass(frozen=True)
class Carrier:
    """One carrier: its protocol machine, its secret, how it signs, and its webhook's answer."""

    name: str
    machine: Callable[[], CarrierMachine]
    secret: Callable[[TelephonySettings], str | None]
    valid: Callable[[str, Signed], bool]
    answer: Callable[[str], Response]
    signs_stream: bool = False
    """The carrier signs the stream's handshake (Twilio); else the stream URL carries a token."""


CARRIERS = (
    Carrier(
        "twilio", TwilioStream, lambda s: s.twilio_auth_token,
        lambda secret, r: signatures.twilio_valid(secret, r.url, r.form, r.headers.get("x-twilio-signature")),
        lambda url: _xml(twiml(url)), signs_stream=True,
    ),
    Carrier(
        "telnyx", TelnyxStream, lambda s: s.telnyx_public_key,
        lambda key, r: signatures.telnyx_valid(
            key, r.body, r.headers.get("telnyx-signature-ed25519"), r.headers.get("telnyx-timestamp")
        ),
        lambda url: _xml(texml(url)),
    ),
    Carrier(
        "plivo", PlivoStream, lambda s: s.plivo_auth_token,
        lambda secret, r: signatures.plivo_valid(
            secret, r.method, r.url, r.form,
            r.headers.get("x-plivo-signature-v3"), r.headers.get("x-plivo-signature-v3-nonce"),
        ),
        lambda url: _xml(plivo_xml(url)),
    ),
    Carrier(
        "vonage", VonageStream, lambda s: s.vonage_signature_secret,
        lambda secret, r: signatures.vonage_valid(secret, r.headers.get("authorization"), r.body),
        lambda url: JSONResponse(ncco(url)),
    ),
)


def public_url(settings: TelephonySettings, scope: dict[str, Any], headers: Any, websocket: bool = False) -> str:
    """The URL the carrier called (path and query), on the agent's public base URL."""
    if settings.public_url:
        base = settings.public_url.rstrip("/")
    else:
        scheme = scope.get("scheme", "http").replace("ws", "http")
        base = f"{scheme}://{headers.get('host', '')}"
    if websocket:
        base = "ws" + base.removeprefix("http")
    query = scope.get("query_string", b"").decode("latin-1")
    return base + scope["path"] + (f"?{query}" if query else "")


def telephony_routes(service: AgentService) -> list[BaseRoute]:
    """The carriers' webhooks and streams, acting on `service`."""
    settings = service.settings.telephony
    tokens = signatures.StreamTokens()
    routes: list[BaseRoute] = []
    for carrier in CARRIERS:
        routes.append(Route(f"{PREFIX}{carrier.name}", _webhook(carrier, settings, tokens), methods=["GET", "POST"]))
        routes.append(WebSocketRoute(f"{PREFIX}{carrier.name}/stream", _stream(carrier, service, tokens)))
    return routes


def _webhook(carrier: Carrier, settings: TelephonySettings, tokens: signatures.StreamTokens) -> Callable[..., Any]:
    async def webhook(request: Request) -> Response:
        secret = carrier.secret(settings)
        if secret is None and not settings.insecure:
            return PlainTextResponse("Not Found", status_code=404)
        body = await request.body()
        is_form = request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded")
        form = parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True) if is_form else []
        url = public_url(settings, request.scope, request.headers)
        signed = Signed(request.method, url, form, body, request.headers)
        if secret is not None and not carrier.valid(secret, signed):
            logger.warning("refused a %s webhook to %s: its signature does not match", carrier.name, request.url.path)
            return PlainTextResponse("Forbidden", status_code=403)
        stream_url = public_url(settings, {**request.scope, "query_string": b"", "path": f"{PREFIX}{carrier.name}/stream"},
                                request.headers, websocket=True)
        if not carrier.signs_stream:
            stream_url += "?" + urlencode({TOKEN_PARAM: tokens.mint(carrier.name)})
        return carrier.answer(stream_url)

    return webhook


def _stream(carrier: Carrier, service: AgentService, tokens: signatures.StreamTokens) -> Callable[..., Any]:
    settings = service.settings.telephony

    async def stream(websocket: WebSocket) -> None:
        secret = carrier.secret(settings)
        if secret is None and not settings.insecure:
            await websocket.close(POLICY, "no such carrier here")
            return
        if secret is not None and not _stream_let_in(carrier, secret, websocket, settings, tokens):
            logger.warning("refused a %s media stream: its signature does not match", carrier.name)
            await websocket.close(POLICY, "signature")
            return
        await websocket.accept()
        await serve_call(WebSocketTransport(websocket), service, carrier.machine, settings)

    return stream


def _stream_let_in(
    carrier: Carrier, secret: str, websocket: WebSocket, settings: TelephonySettings, tokens: signatures.StreamTokens,
) -> bool:
    if carrier.signs_stream:
        url = public_url(settings, websocket.scope, websocket.headers, websocket=True)
        return signatures.twilio_valid(secret, url, (), websocket.headers.get("x-twilio-signature"))
    return tokens.valid(carrier.name, websocket.query_params.get(TOKEN_PARAM))
