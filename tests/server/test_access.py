"""The access policy on the real speech server: the API key, Host (DNS rebinding), Origin on
WebSocket handshakes, JSON-only bodies, CORS, no key in a URL or a log, the default bind."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import httpx
import pytest
from tests.server.wire import ws_url
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from voicestream.access import OPEN_PATHS, RedactQueryValues, parse_names
from voicestream.client import (
    AsyncInvocationsClient,
    AudioChunk,
    InvocationsClient,
    SpeechError,
    SpeechSession,
    SyncSpeechSession,
)
from voicestream.server import ServerSettings, free_port, running_server

KEY = "s3cret-key"
ORIGIN = "https://app.example.test"
BEARER = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def locked_server(engine) -> Iterator[str]:
    settings = ServerSettings(
        host="127.0.0.1", port=free_port(), api_key=KEY, cors_origins=(ORIGIN,), allowed_hosts=("speech.internal",)
    )
    with running_server(engine, settings) as url:
        yield url


def test_routes_need_the_key_except_ping_and_the_page(locked_server: str) -> None:
    assert httpx.get(f"{locked_server}/ping").status_code == 200
    assert httpx.get(f"{locked_server}/").status_code == 200
    assert httpx.get(f"{locked_server}/web/js/api.js").status_code == 200
    assert "/web/js/api.js" in OPEN_PATHS
    for path in ("/metrics", "/voices", "/web/", "/web/../metrics", "/index.html"):
        refused = httpx.get(f"{locked_server}{path}")
        assert refused.status_code == 401, path
        assert refused.json()["error"]["code"] == "unauthorized"
    refused = httpx.post(f"{locked_server}/invocations", json={"text": "Hi."})
    assert refused.status_code == 401
    wrong = httpx.get(f"{locked_server}/metrics", headers={"Authorization": "Bearer s3cret-kez"})
    assert wrong.status_code == 401


def test_the_bearer_header_is_accepted_and_a_key_in_the_url_is_not(locked_server: str) -> None:
    bearer = httpx.post(f"{locked_server}/invocations", json={"text": "Hi."}, headers=BEARER, timeout=60)
    assert bearer.status_code == 200 and bearer.content[:4] == b"RIFF"
    query = httpx.get(f"{locked_server}/metrics?key={KEY}")
    assert query.status_code == 401
    assert "not accepted in URLs" in query.json()["error"]["message"]


async def test_every_python_client_sends_its_api_key_as_a_header(locked_server: str) -> None:
    with InvocationsClient(locked_server, api_key=KEY) as client:
        assert b"".join(client.stream("Hi."))[:4] == b"RIFF"
    async with AsyncInvocationsClient(locked_server, api_key=KEY) as client:
        assert [chunk async for chunk in client.stream("Hi.", format="pcm16")]
    async with await SpeechSession.connect(locked_server, api_key=KEY) as session:
        assert [event async for event in session.speak("Hi.") if isinstance(event, AudioChunk)]
    with SyncSpeechSession.connect(locked_server, api_key=KEY) as sync_session:
        assert [event for event in sync_session.speak("Hi.") if isinstance(event, AudioChunk)]
    with pytest.raises(SpeechError), InvocationsClient(locked_server) as keyless:
        b"".join(keyless.stream("Hi."))


async def _spoken(ws) -> list[str]:
    await ws.send(json.dumps({"text": "Hi.", "request_id": "k"}))
    kinds = []
    while not kinds or kinds[-1] != "synthesis_complete":
        frame = await ws.recv()
        if isinstance(frame, str):
            kinds.append(json.loads(frame)["type"])
    return kinds


async def test_websocket_takes_the_key_as_a_header_or_subprotocol_never_in_the_url(locked_server: str) -> None:
    url = ws_url(locked_server)
    for refused in ({}, {"subprotocols": ["voicestream", "voicestream.key.nope"]}):
        with pytest.raises(InvalidStatus) as raised:
            await connect(url, **refused)  # type: ignore[arg-type]
        assert raised.value.response.status_code == 403
    with pytest.raises(InvalidStatus):
        await connect(f"{url}?key={KEY}")
    async with connect(url, additional_headers=BEARER) as ws:
        assert await _spoken(ws) == ["synthesis_start", "synthesis_complete"]
    browser_form = ["voicestream", f"voicestream.key.{KEY}"]
    async with connect(url, subprotocols=browser_form) as ws:  # type: ignore[arg-type]
        assert ws.subprotocol == "voicestream"
        assert await _spoken(ws) == ["synthesis_start", "synthesis_complete"]


async def test_a_handshake_from_another_site_is_refused_and_logged_once(
    speech_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="voicestream.access")
    url = ws_url(speech_server)
    for _ in range(3):
        with pytest.raises(InvalidStatus) as raised:
            await connect(url, origin="http://evil.example.test")  # type: ignore[arg-type]
        assert raised.value.response.status_code == 403
    warnings = [r for r in caplog.records if r.name == "voicestream.access" and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "http://evil.example.test" in warnings[0].getMessage()
    with pytest.raises(InvalidStatus):
        await connect(url, origin="null")  # type: ignore[arg-type]
    port = speech_server.rsplit(":", 1)[1]
    with pytest.raises(InvalidStatus):  # the same host on another port is another origin
        await connect(url, origin=f"http://127.0.0.1:{int(port) + 1}")  # type: ignore[arg-type]


async def test_same_origin_configured_origin_and_no_origin_may_open_sessions(
    speech_server: str, locked_server: str
) -> None:
    own = speech_server.replace("ws://", "http://")
    async with connect(ws_url(speech_server), origin=own) as ws:  # type: ignore[arg-type]
        assert await _spoken(ws) == ["synthesis_start", "synthesis_complete"]
    async with connect(ws_url(speech_server)) as ws:  # no Origin: not a browser
        assert await _spoken(ws) == ["synthesis_start", "synthesis_complete"]
    async with connect(ws_url(locked_server), origin=ORIGIN, additional_headers=BEARER) as ws:  # type: ignore[arg-type]
        assert await _spoken(ws) == ["synthesis_start", "synthesis_complete"]
    with pytest.raises(InvalidStatus):
        await connect(ws_url(locked_server), origin="https://other.example.test", additional_headers=BEARER)  # type: ignore[arg-type]


@pytest.mark.parametrize("path", ["/invocations", "/v1/audio/speech"])
@pytest.mark.parametrize(
    ("content_type", "origin"),
    [("text/plain;charset=UTF-8", None), ("application/x-www-form-urlencoded", None), (None, "https://page.example.test")],
)
def test_a_body_that_is_not_typed_json_gets_415(
    speech_server: str, path: str, content_type: str | None, origin: str | None
) -> None:
    """A browser's "simple request" (text/plain, a form, or an untyped Blob, which always
    carries Origin) is refused; an untyped body without Origin is a non-browser caller (a
    SageMaker InvokeEndpoint without ContentType, as the original sample's clients) and is served."""
    body = json.dumps({"text": "Hi.", "input": "Hi."}).encode()
    headers = {"Content-Type": content_type} if content_type else {}
    if origin:
        headers["Origin"] = origin
    untyped = httpx.post(f"{speech_server}{path}", content=body, timeout=60)
    assert untyped.status_code == 200
    refused = httpx.post(f"{speech_server}{path}", content=body, headers=headers, timeout=30)
    assert refused.status_code == 415
    assert refused.json()["error"]["code"] == "unsupported_media_type"
    typed = httpx.post(
        f"{speech_server}{path}", content=body, headers={"Content-Type": "application/json; charset=utf-8"}, timeout=60
    )
    assert typed.status_code == 200


def test_a_rebinding_host_is_refused_local_and_configured_names_are_not(locked_server: str) -> None:
    port = locked_server.rsplit(":", 1)[1]
    rebound = httpx.get(f"{locked_server}/metrics", headers={**BEARER, "Host": f"evil.example.test:{port}"})
    assert rebound.status_code == 403 and rebound.json()["error"]["code"] == "forbidden"
    assert httpx.get(f"{locked_server}/ping", headers={"Host": "evil.example.test"}).status_code == 200
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "LOCALHOST.", f"speech.internal:{port}", f"[::1]:{port}"):
        assert httpx.get(f"{locked_server}/metrics", headers={**BEARER, "Host": host}).status_code == 200, host


async def test_a_rebinding_host_cannot_open_a_session(speech_server: str) -> None:
    port = int(speech_server.rsplit(":", 1)[1])
    rebound = ws_url(f"http://evil.example.test:{port}")  # the name, re-pointed at 127.0.0.1
    with pytest.raises(InvalidStatus) as raised:
        await connect(rebound, host="127.0.0.1", port=port)
    assert raised.value.response.status_code == 403
    with pytest.raises(InvalidStatus):  # a second Host header does not get past the check
        await connect(ws_url(speech_server), additional_headers={"Host": "evil.example.test"})


def test_any_host_is_allowed_with_a_star(make_speech_server) -> None:
    url = make_speech_server(allowed_hosts=("*",))
    assert httpx.get(f"{url}/voices", headers={"Host": "kokoro.elb.example.test"}, timeout=30).status_code == 200


def test_no_key_reaches_the_access_log(engine, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    settings = ServerSettings(host="127.0.0.1", port=free_port(), api_key=KEY)
    with running_server(engine, settings, log_level="info") as url:
        assert httpx.get(f"{url}/metrics?key={KEY}&x=1").status_code == 401
        assert httpx.get(f"{url}/metrics", headers=BEARER).status_code == 200
    access = [r.getMessage() for r in caplog.records if r.name == "uvicorn.access"]
    assert any("/metrics?key=...&x=..." in line for line in access), access
    server_lines = [r.getMessage() for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))]
    assert not [line for line in server_lines if KEY in line]  # (httpx logs the client's own URL)


def test_redaction_keeps_paths_without_a_query_and_covers_websocket_lines() -> None:
    record = logging.LogRecord("uvicorn.access", logging.INFO, "", 0, '%s "%s %s"', ("1.2.3.4", "GET", "/ping"), None)
    RedactQueryValues().filter(record)
    assert record.getMessage() == '1.2.3.4 "GET /ping"'
    handshake = ("1.2.3.4", "/invocations-bidirectional-stream?key=k3y&api_key=k3y")
    record = logging.LogRecord("uvicorn.error", logging.INFO, "", 0, '%s - "WebSocket %s" [accepted]', handshake, None)
    RedactQueryValues().filter(record)
    assert "k3y" not in record.getMessage() and "?key=...&api_key=..." in record.getMessage()


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


def test_serve_binds_loopback_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    import typer

    from voicestream.cli import app

    command = typer.main.get_command(app).commands["serve"]  # type: ignore[attr-defined]
    params = command.make_context("serve", ["--allowed-host", "a.test,b.test", "--allowed-host", "c.test"]).params
    assert params["host"] == "127.0.0.1"
    assert ServerSettings().host == "127.0.0.1"
    assert parse_names(params["allowed_host"]) == ("a.test", "b.test", "c.test")
    monkeypatch.setenv("VOICESTREAM_ALLOWED_HOSTS", "*")  # what the container images set
    assert parse_names(command.make_context("serve", []).params["allowed_host"]) == ("*",)
