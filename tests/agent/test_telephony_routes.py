"""The carriers' routes on the real agent (no speech needed: nothing here is answered): each
webhook and stream refuses a bad or missing signature when its secret is set, a carrier
without a secret is not there, the agent's API key does not stand in the carriers' way, and
a stream that sends garbage, a 10 MB frame or nothing is closed with the reason logged."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from voicestream.agent.app import AgentSettings, create_app, running_agent
from voicestream.agent.llm import create_model
from voicestream.agent.settings import TelephonySettings
from voicestream.agent.telephony.signatures import plivo_signature, twilio_signature, vonage_token

SECRET = "a-carrier-secret-of-thirty-two-bytes"
TELNYX_PUBLIC = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
SECRETS = TelephonySettings(
    twilio_auth_token=SECRET, telnyx_public_key=TELNYX_PUBLIC, plivo_auth_token=SECRET,
    vonage_signature_secret=SECRET, greeting="",
)
CARRIERS = ["twilio", "telnyx", "plivo", "vonage"]


@contextlib.contextmanager
def agent(telephony: TelephonySettings, **settings: object) -> Iterator[str]:
    llm = create_model("openai", model="none", base_url="http://127.0.0.1:9/v1", api_key="unused")
    app = create_app(AgentSettings(speech_url="ws://127.0.0.1:9", telephony=telephony, **settings), llm=llm)
    with running_agent(app) as url:
        yield url


@pytest.fixture(scope="module")
def signed_agent() -> Iterator[str]:
    with agent(SECRETS, api_key="the-agents-own-key") as url:
        yield url


def good_headers(carrier: str, url: str, body: str) -> dict[str, str]:
    if carrier == "twilio":
        return {"X-Twilio-Signature": twilio_signature(SECRET, url, [("CallSid", "CA1")])}
    if carrier == "plivo":
        return {"X-Plivo-Signature-V3": plivo_signature(SECRET, "POST", url, "n", [("CallSid", "CA1")]),
                "X-Plivo-Signature-V3-Nonce": "n"}
    return {"Authorization": f"Bearer {vonage_token(SECRET, {'iat': int(time.time())})}"}


FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.mark.parametrize("carrier", CARRIERS)
def test_each_webhook_refuses_a_missing_or_bad_signature(signed_agent: str, carrier: str) -> None:
    url = f"{signed_agent}/telephony/{carrier}"
    missing = httpx.post(url, content="CallSid=CA1", headers=FORM)
    bad = httpx.post(url, content="CallSid=CA1", headers={**FORM, 
        "X-Twilio-Signature": "AAAA", "X-Plivo-Signature-V3": "AAAA", "X-Plivo-Signature-V3-Nonce": "n",
        "telnyx-signature-ed25519": "AAAA", "telnyx-timestamp": str(int(time.time())),
        "Authorization": f"Bearer {vonage_token('another-secret-of-thirty-two-bytes', {})}"
    })
    assert (missing.status_code, bad.status_code) == (403, 403)


@pytest.mark.parametrize("carrier", ["twilio", "plivo", "vonage"])
def test_a_signed_webhook_gets_its_answer_without_the_agents_key(signed_agent: str, carrier: str) -> None:
    url = f"{signed_agent}/telephony/{carrier}"
    body = "CallSid=CA1"
    answer = httpx.post(url, content=body, headers={**FORM, **good_headers(carrier, url, body)})
    assert answer.status_code == 200, answer.text
    assert "/telephony/" in answer.text and "stream" in answer.text
    # a form body and no key: still refused elsewhere
    assert httpx.post(f"{signed_agent}/invocations", content=body, headers=FORM).status_code == 401


@pytest.mark.parametrize("carrier", CARRIERS)
async def test_each_stream_refuses_a_missing_or_bad_signature(signed_agent: str, carrier: str) -> None:
    stream = signed_agent.replace("http://", "ws://") + f"/telephony/{carrier}/stream"
    for url, headers in [(stream, {}), (f"{stream}?token=9999999999.forged", {"X-Twilio-Signature": "AAAA"})]:
        with pytest.raises(InvalidStatus) as refused:
            await connect(url, additional_headers=headers)
        assert refused.value.response.status_code == 403


async def test_a_twilio_stream_signed_over_its_wss_url_is_let_in(signed_agent: str) -> None:
    stream = signed_agent.replace("http://", "ws://") + "/telephony/twilio/stream"
    async with connect(stream, additional_headers={"X-Twilio-Signature": twilio_signature(SECRET, stream)}) as socket:
        await socket.send(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
        await socket.send(json.dumps({"event": "stop"}))  # a stop before start: a hang-up all the same
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(socket.recv(), 10)


def test_a_carrier_without_its_secret_is_not_there_unless_insecure() -> None:
    with agent(TelephonySettings(greeting="")) as url:
        for carrier in CARRIERS:
            assert httpx.post(f"{url}/telephony/{carrier}", content="a=b", headers=FORM).status_code == 404
    with agent(TelephonySettings(insecure=True, greeting="")) as url:
        answer = httpx.post(f"{url}/telephony/twilio", content="a=b", headers=FORM)
        assert answer.status_code == 200 and "<Connect><Stream" in answer.text


def test_the_public_url_is_what_the_answers_name_and_what_signatures_cover() -> None:
    public = "https://agent.example.test"
    with agent(replace(SECRETS, public_url=public)) as url:
        signed_url = f"{public}/telephony/twilio"
        headers = {**FORM, "Host": "agent.example.test", **good_headers("twilio", signed_url, "CallSid=CA1")}
        answer = httpx.post(f"{url}/telephony/twilio", content="CallSid=CA1", headers=headers)
        assert answer.status_code == 200, answer.text
        assert 'url="wss://agent.example.test/telephony/twilio/stream"' in answer.text
        local = {**FORM, **good_headers("twilio", f"{url}/telephony/twilio", "CallSid=CA1")}
        assert httpx.post(f"{url}/telephony/twilio", content="CallSid=CA1", headers=local).status_code == 403


@pytest.mark.parametrize(
    ("frame", "reason"),
    [("not json", "not JSON"), (b"\x00" * (10 * 1024 * 1024), "a frame of 10485760 bytes"),
     (json.dumps({"event": "media", "media": {"payload": "AAAA"}}), "media on a Twilio stream that is connecting")],
)
async def test_a_stream_sending_garbage_or_a_huge_frame_is_closed_with_the_reason_logged(frame, reason, caplog) -> None:
    with agent(TelephonySettings(insecure=True, greeting="")) as url:
        stream = url.replace("http://", "ws://") + "/telephony/twilio/stream"
        with caplog.at_level(logging.WARNING, logger="voicestream.agent.telephony.call"):
            async with connect(stream, max_size=None) as socket:
                await socket.send(frame)
                with pytest.raises(ConnectionClosed) as closed:
                    await asyncio.wait_for(socket.recv(), 10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
        assert reason in caplog.text


async def test_a_stream_that_sends_nothing_is_closed_at_the_idle_timeout(caplog) -> None:
    from voicestream.agent.runtime import AnswerLimits

    with agent(TelephonySettings(insecure=True, greeting=""), limits=AnswerLimits(realtime_idle_s=0.5)) as url:
        stream = url.replace("http://", "ws://") + "/telephony/vonage/stream"
        with caplog.at_level(logging.INFO, logger="voicestream.edge.connection"):
            async with connect(stream) as socket:
                with pytest.raises(ConnectionClosed) as closed:
                    await asyncio.wait_for(socket.recv(), 10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
        assert "closing a Vonage call that was idle for 0.5 s" in caplog.text


async def test_a_stream_to_a_draining_agent_gets_no_frame_and_a_going_away_close(caplog) -> None:
    """Carriers have no error frame: a stream refused while the agent drains gets the close
    alone (1001, going away), and the refusal is logged."""
    llm = create_model("openai", model="none", base_url="http://127.0.0.1:9/v1", api_key="unused")
    app = create_app(AgentSettings(speech_url="ws://127.0.0.1:9", telephony=TelephonySettings(insecure=True, greeting="")), llm=llm)
    with running_agent(app) as url:
        await app.state.service.drain(grace_s=0.1)
        stream = url.replace("http://", "ws://") + "/telephony/twilio/stream"
        with caplog.at_level(logging.INFO, logger="voicestream.edge.connection"):
            async with connect(stream) as socket:
                with pytest.raises(ConnectionClosed) as closed:  # before any frame
                    await asyncio.wait_for(socket.recv(), 10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        assert "refused a connection (1001): The server is shutting down" in caplog.text
