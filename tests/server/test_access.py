"""Access control on the real server: the API key in each of its forms, CORS, the default bind."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from tests.server.wire import ws_url
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from voicestream.server import ServerSettings, free_port, running_server

KEY = "s3cret-key"
ORIGIN = "https://app.example.test"


@pytest.fixture(scope="module")
def locked_server(engine) -> Iterator[str]:
    settings = ServerSettings(host="127.0.0.1", port=free_port(), api_key=KEY, cors_origins=(ORIGIN,))
    with running_server(engine, settings) as url:
        yield url


def test_routes_need_the_key_except_ping(locked_server: str) -> None:
    assert httpx.get(f"{locked_server}/ping").status_code == 200
    for path in ("/metrics", "/invocations"):
        refused = httpx.post(f"{locked_server}{path}", json={"text": "Hi."}) if path != "/metrics" else httpx.get(
            f"{locked_server}{path}")
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "unauthorized"
    wrong = httpx.get(f"{locked_server}/metrics", headers={"Authorization": "Bearer s3cret-kez"})
    assert wrong.status_code == 401


def test_bearer_header_and_query_key_are_accepted(locked_server: str) -> None:
    bearer = httpx.post(f"{locked_server}/invocations", json={"text": "Hi."},
                        headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    assert bearer.status_code == 200 and bearer.content[:4] == b"RIFF"
    query = httpx.get(f"{locked_server}/metrics?key={KEY}")
    assert query.status_code == 200


async def _spoken(ws) -> list[str]:
    await ws.send(json.dumps({"text": "Hi.", "request_id": "k"}))
    kinds = []
    while not kinds or kinds[-1] != "synthesis_complete":
        frame = await ws.recv()
        if isinstance(frame, str):
            kinds.append(json.loads(frame)["type"])
    return kinds


async def test_websocket_needs_the_key_in_any_of_its_forms(locked_server: str) -> None:
    with pytest.raises(InvalidStatus):
        await connect(ws_url(locked_server))
    with pytest.raises(InvalidStatus):
        await connect(ws_url(locked_server), subprotocols=["voicestream", "voicestream.key.nope"])
    async with connect(ws_url(locked_server), additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
        assert await _spoken(ws) == ["synthesis_start", "synthesis_complete"]
    async with connect(ws_url(locked_server) + f"?key={KEY}") as ws:
        assert await _spoken(ws) == ["synthesis_start", "synthesis_complete"]
    browser_form = ["voicestream", f"voicestream.key.{KEY}"]
    async with connect(ws_url(locked_server), subprotocols=browser_form) as ws:  # type: ignore[arg-type]
        assert ws.subprotocol == "voicestream"
        assert await _spoken(ws) == ["synthesis_start", "synthesis_complete"]


def test_cors_allows_only_the_configured_origin(locked_server: str) -> None:
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization"}
    allowed = httpx.options(f"{locked_server}/invocations", headers={"Origin": ORIGIN, **preflight})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == ORIGIN
    other = httpx.options(f"{locked_server}/invocations", headers={"Origin": "https://evil.test", **preflight})
    assert "access-control-allow-origin" not in other.headers


def test_no_cors_headers_without_configured_origins(speech_server: str) -> None:
    response = httpx.get(f"{speech_server}/ping", headers={"Origin": ORIGIN})
    assert "access-control-allow-origin" not in response.headers


def test_serve_binds_loopback_unless_told_otherwise() -> None:
    import typer

    from voicestream.cli import app

    command = typer.main.get_command(app).commands["serve"]  # type: ignore[attr-defined]
    assert command.make_context("serve", []).params["host"] == "127.0.0.1"
    assert ServerSettings().host == "127.0.0.1"
