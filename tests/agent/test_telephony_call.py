"""A phone call end to end: a stand-in Twilio (Twilio cannot be reached from here; it speaks
Media Streams' documented JSON exactly) calls the real agent (echo LLM, real speech server,
Silero VAD, Whisper) on loopback, signed with the account's auth token as Twilio signs.

The greeting and the answer come back as mu-law media with marks; the caller speaking over
the answer gets a `clear`, and the conversation keeps what the marks said had played; a
hang-up frees the call's answer at once. The other carriers' stand-ins prove audio both
ways and the clear over the same call."""

from __future__ import annotations

import asyncio
import base64
import time
from urllib.parse import parse_qsl, urlencode

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from tests.agent.llm_stubs import echo
from tests.agent.realtime_checks import echo_agent, spoken
from tests.agent.telephony_checks import until

from voicestream.agent.settings import TelephonySettings
from voicestream.agent.telephony.call import TelephonyCall
from voicestream.agent.telephony.signatures import plivo_signature, twilio_signature, vonage_token
from voicestream.audio import mulaw_to_float
from voicestream.audio.pcm import pcm16_to_float
from voicestream.bench.carrier import call, webhook_stream_url

TOKEN = "twilio-auth-token"
GREETING = "Hello, how can I help?"


def said(call_: TelephonyCall) -> bool:
    """The call's last answer has been sent whole."""
    return call_.session.response is None and call_.session.last_response is not None


def cut_with_nothing_playing(call_: TelephonyCall, phone) -> bool:
    """The caller spoke while the carrier had nothing left to play (on a loaded machine the
    render can fall behind playback between two pieces): the answer is cut and there is
    nothing to clear. A clear is then not sent; the answer must still have been cancelled."""
    last = call_.session.last_response
    return (
        call_.session.response is None
        and last is not None
        and last.item.status == "incomplete"
        and not phone.to_play
    )


def the_call(service) -> TelephonyCall:
    (connection,) = [c for c in service.connections if isinstance(c, TelephonyCall)]
    return connection


async def test_a_twilio_call_greets_answers_is_cut_by_the_caller_and_hangs_up(speech_server):
    services = []
    telephony = TelephonySettings(twilio_auth_token=TOKEN, greeting=GREETING)
    with echo_agent(speech_server, services, telephony=telephony) as (url, llm):
        base = url.replace("ws://", "http://")
        form = {"CallSid": "CA1", "From": "+15550001111", "To": "+15550002222"}
        signature = twilio_signature(TOKEN, f"{base}/telephony/twilio", sorted(form.items()))
        stream_url = await webhook_stream_url(base, "twilio", {"X-Twilio-Signature": signature}, urlencode(form))
        assert stream_url == f"{url}/telephony/twilio/stream"
        question = spoken(speech_server, "Please give me a long answer.")
        interruption = spoken(speech_server, "Wait a moment.")
        handshake = {"X-Twilio-Signature": twilio_signature(TOKEN, stream_url)}
        async with asyncio.timeout(300), call(stream_url, "twilio", handshake) as twilio:
            # The greeting: mu-law media, each piece followed by a mark, played to its end.
            await until(lambda: services[0].connections, 30, "the call")
            call_ = the_call(services[0])
            await until(lambda: said(call_) and not twilio.to_play and not call_.marks_waiting, 60, "the greeting")
            greeting = b"".join(value for _, value in twilio.kinds("media"))
            assert 0.8 < len(greeting) / 8000 < 4.0
            assert float(abs(mulaw_to_float(greeting)).max()) > 0.1  # speech, not silence
            assert twilio.kinds("mark")[-1][0] > twilio.kinds("media")[-1][0]  # a mark after the last piece

            # The question; the answer plays for a while, then the caller speaks over it.
            answer_from = twilio.played_bytes  # nothing plays until the answer comes
            twilio.say(question, then_silence_s=1.5)
            await until(lambda: twilio.played_bytes - answer_from > 8000 * 1.5, 90, "the answer")
            twilio.say(interruption, then_silence_s=1.0)
            await until(lambda: twilio.clears or cut_with_nothing_playing(call_, twilio), 60, "the clear")
            assert not twilio.to_play
            # The caller's question was heard, and the answer was what the LLM wrote.
            assert "long answer" in echo(llm.requests[0]["messages"]).lower()
            hanging_up = call_.session

        (answer,) = [
            e.turn for e in hanging_up.conversation.entries
            if e.turn is not None and "long answer" in e.turn.question.lower()
        ]
        assert answer.heard_s is not None
        if twilio.clears:  # the conversation keeps what had played of the cut answer, to the marks' word
            _, played_at_clear = twilio.clears[0]
            played_ms = (played_at_clear - answer_from) * 1000 / 8000
            assert abs(answer.heard_s * 1000 - played_ms) <= 100, (answer.heard_s, played_ms)
        # The hang-up freed the call: no socket, no answer under way, no task of its session.
        await until(lambda: not services[0].connections and services[0].active_answers == 0, 30, "the hang-up")
        assert hanging_up.response is None and not hanging_up.busy


SECRET = "a-carrier-secret-of-thirty-two-bytes"
TELNYX_KEY = Ed25519PrivateKey.generate()


def signed(carrier: str, url: str, body: str) -> tuple[dict[str, str], TelephonySettings]:
    """The headers the carrier signs its webhook with, and the agent's settings that check them."""
    if carrier == "telnyx":
        stamp = str(int(time.time()))
        signature = base64.b64encode(TELNYX_KEY.sign(f"{stamp}|{body}".encode())).decode()
        public = TELNYX_KEY.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        settings = TelephonySettings(telnyx_public_key=base64.b64encode(public).decode(), greeting="")
        return {"telnyx-signature-ed25519": signature, "telnyx-timestamp": stamp}, settings
    if carrier == "plivo":
        signature = plivo_signature(SECRET, "POST", url, "nonce-1", parse_qsl(body))
        headers = {"X-Plivo-Signature-V3": signature, "X-Plivo-Signature-V3-Nonce": "nonce-1"}
        return headers, TelephonySettings(plivo_auth_token=SECRET, greeting="")
    token = vonage_token(SECRET, {"iat": int(time.time()), "jti": "1"})
    return {"Authorization": f"Bearer {token}"}, TelephonySettings(vonage_signature_secret=SECRET, greeting="")


@pytest.mark.parametrize("carrier", ["telnyx", "plivo", "vonage"])
async def test_each_carrier_hears_the_caller_answers_clears_and_takes_keys(speech_server, carrier):
    """Audio both ways in the carrier's own format, the clear when the caller speaks over
    the answer, and a key press as a turn, over each carrier's signed webhook and stream."""
    services = []
    body = "CallSid=c1&From=%2B15550001111"
    headers, telephony = signed(carrier, "", body)
    with echo_agent(speech_server, services, telephony=telephony) as (url, llm):
        base = url.replace("ws://", "http://")
        if carrier == "plivo":  # Plivo signs the URL itself
            headers, _ = signed(carrier, f"{base}/telephony/plivo", body)
        stream_url = await webhook_stream_url(base, carrier, headers, body)
        assert stream_url.startswith(f"{url}/telephony/{carrier}/stream?token=")
        question = spoken(speech_server, "Please give me a long answer.")
        async with asyncio.timeout(300), call(stream_url, carrier) as phone:
            phone.say(question, then_silence_s=1.5)
            await until(lambda: phone.played_bytes > phone.bytes_per_s * 1.0, 90, "the answer")
            answer = b"".join(value for _, value in phone.kinds("media"))
            loudest = float(abs(pcm16_to_float(answer) if carrier == "vonage" else mulaw_to_float(answer)).max())
            assert loudest > 0.1
            phone.say(spoken(speech_server, "Wait a moment."), then_silence_s=1.0)
            call_ = the_call(services[0])
            await until(lambda: phone.clears or cut_with_nothing_playing(call_, phone), 60, "the clear")
            assert "long answer" in echo(llm.requests[0]["messages"]).lower()
            await phone.socket.send(phone.carrier.dtmf("7"))
            await until(lambda: any("pressed 7" in echo(r["messages"]) for r in llm.requests), 60, "the key press")
        await until(lambda: not services[0].connections and services[0].active_answers == 0, 30, "the hang-up")
