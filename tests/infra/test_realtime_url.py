"""`agent-infra demo --realtime`: its presigned URL, offline (stub credentials and a fixed
clock give one exact URL, whose signature is checked here against SigV4 computed by hand,
the way AWS documents it: canonical request, string to sign, derived key), and one turn
spoken over a local agent's /ws."""

from __future__ import annotations

import datetime
import hashlib
import hmac
import wave
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlsplit

import boto3
import botocore.auth
import pytest
from typer.testing import CliRunner

from voicestream.infra.cli import agent_infra
from voicestream.infra.realtime import PRESIGN_EXPIRES_S, presigned_url, realtime_target
from voicestream.protocol import SESSION_HEADER

ARN = "arn:aws:bedrock-agentcore:eu-west-1:123456789012:runtime/voicestream_agent-AbCdE12345"
SESSION_ID = "voicestream-0123456789abcdef0123456789abcdef"
ACCESS_KEY = "AKIDEXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
TOKEN = "stub-session-token"
NOW = datetime.datetime(2026, 12, 2, 13, 45, 7, tzinfo=datetime.UTC)


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's signers read the time through this one function."""
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: NOW.replace(tzinfo=None))


def _stub_session(token: str | None = None) -> boto3.Session:
    return boto3.Session(
        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, aws_session_token=token, region_name="us-east-1"
    )


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode(), hashlib.sha256).digest()


def _expected_signature(host: str, path: str, query: list[tuple[str, str]]) -> str:
    """SigV4 for a presigned GET to a service other than S3: the path's segments encoded twice
    (the ARN's `:` and `/` are already encoded once in the URL), every query parameter but the
    signature in the canonical query, only `host` signed, the empty body's hash."""

    def encode(value: str) -> str:
        return quote(value, safe="-_.~")

    canonical_query = "&".join(f"{encode(k)}={encode(v)}" for k, v in sorted(query) if k != "X-Amz-Signature")
    empty_body = hashlib.sha256(b"").hexdigest()
    canonical = "\n".join(["GET", quote(path, safe="/~"), canonical_query, f"host:{host}", "", "host", empty_body])
    day = NOW.strftime("%Y%m%d")
    scope = f"{day}/eu-west-1/bedrock-agentcore/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", NOW.strftime("%Y%m%dT%H%M%SZ"), scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = _hmac(f"AWS4{SECRET_KEY}".encode(), day)
    for part in ("eu-west-1", "bedrock-agentcore", "aws4_request"):
        key = _hmac(key, part)
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


@pytest.mark.parametrize("token", [None, TOKEN])
def test_presigned_url_is_sigv4_for_the_runtime_ws_in_the_arn_region(fixed_clock: None, token: str | None) -> None:
    url = presigned_url(ARN, SESSION_ID, session=_stub_session(token))
    parts = urlsplit(url)
    assert parts.scheme == "wss"
    assert parts.netloc == "bedrock-agentcore.eu-west-1.amazonaws.com"
    assert parts.path == f"/runtimes/{quote(ARN, safe='')}/ws"
    query = parse_qsl(parts.query, keep_blank_values=True)
    params = dict(query)
    assert len(params) == len(query), "a parameter repeated"
    expected = {
        SESSION_HEADER: SESSION_ID,
        "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
        "X-Amz-Credential": f"{ACCESS_KEY}/20261202/eu-west-1/bedrock-agentcore/aws4_request",
        "X-Amz-Date": "20261202T134507Z",
        "X-Amz-Expires": str(PRESIGN_EXPIRES_S),
        "X-Amz-SignedHeaders": "host",
    }
    if token:
        expected["X-Amz-Security-Token"] = token
    assert {k: v for k, v in params.items() if k != "X-Amz-Signature"} == expected
    # The session id is one of the signed parameters: a URL with another session id is refused.
    assert params["X-Amz-Signature"] == _expected_signature(parts.netloc, parts.path, query)


def test_same_inputs_same_url_and_another_session_another_signature(fixed_clock: None) -> None:
    first = presigned_url(ARN, SESSION_ID, session=_stub_session())
    assert presigned_url(ARN, SESSION_ID, session=_stub_session()) == first
    other = presigned_url(ARN, SESSION_ID.replace("0123", "4567"), session=_stub_session())
    signature = lambda url: dict(parse_qsl(urlsplit(url).query))["X-Amz-Signature"]
    assert signature(other) != signature(first)


def test_a_base_url_gets_its_ws_path_with_the_session_and_key_as_headers() -> None:
    target = realtime_target("http://127.0.0.1:8081/", SESSION_ID, api_key="k3y")
    assert target.url == "ws://127.0.0.1:8081/ws"
    assert target.headers == {SESSION_HEADER: SESSION_ID, "Authorization": "Bearer k3y"}
    assert realtime_target("https://agent.example/base", SESSION_ID).url == "wss://agent.example/base/ws"


def test_an_arn_that_is_not_a_runtime_is_refused() -> None:
    with pytest.raises(ValueError, match="Invalid runtime ARN"):
        presigned_url("arn:aws:bedrock:eu-west-1:123456789012:model/x", SESSION_ID, session=_stub_session())


def test_demo_realtime_speaks_one_turn_over_a_local_agents_ws(agent_url: str, tmp_path: Path) -> None:
    """`agent-infra demo --realtime` against the agent on this machine: its /ws (AgentCore's
    route) answers the prompt with audio, written as a WAV."""
    output = tmp_path / "answer.wav"
    result = CliRunner().invoke(
        agent_infra,
        ["demo", "--endpoint-url", agent_url, "--prompt", "Say hello.", "--realtime", "-o", str(output)],
    )
    assert result.exit_code == 0, result.output
    lines = dict(line.split(maxsplit=1) for line in result.stdout.splitlines())
    assert lines["status"] == "completed", result.stdout
    assert lines["first"].endswith(" ms") and lines["transcript"].strip()
    with wave.open(str(output)) as answer:
        assert (answer.getframerate(), answer.getnchannels(), answer.getsampwidth()) == (24000, 1, 2)
        assert answer.getnframes() > 24000 * 0.3  # some speech, not a click
