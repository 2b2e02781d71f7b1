"""The official ``cartesia`` SDK, unchanged, against the Cartesia-compatible routes: bytes, SSE,
and the WebSocket helpers (two contexts on one socket, cancel), with the real model and server."""

from __future__ import annotations

import asyncio
import base64

import pytest
from cartesia import AsyncCartesia, Cartesia
from tests.server.wire import metric, until_above, until_zero

pytestmark = pytest.mark.timeout(300)

VOICE = "af_heart"
CANCELS = 'voicestream_cancels_total{route="cartesia"}'
RAW = {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}


def client(base_url: str) -> Cartesia:
    return Cartesia(api_key="unused", base_url=base_url, websocket_base_url=base_url.replace("http://", "ws://"))


def test_bytes_and_sse_with_timestamps(speech_server: str) -> None:
    with client(speech_server) as cartesia:
        wav = cartesia.tts.generate(
            model_id="sonic-3", transcript="The bytes route.", voice={"id": VOICE},
            output_format={"container": "wav", "encoding": "pcm_s16le", "sample_rate": 16000},
        ).read()
        events = list(cartesia.tts.generate_sse(
            model_id="sonic-3", transcript="Server sent events, with timestamps.", voice=VOICE,
            output_format=RAW, add_timestamps=True, context_id="sse",
        ))
    assert wav[:4] == b"RIFF" and 0.5 < (len(wav) - 44) / 32000 < 4.0
    kinds = [event.type for event in events]
    assert kinds[-1] == "done" and kinds.index("timestamps") < kinds.index("chunk")
    words = [word for e in events if e.type == "timestamps" for word in e.word_timestamps.words]
    assert words == ["Server", "sent", "events,", "with", "timestamps."], words
    audio = b"".join(base64.b64decode(e.data) for e in events if e.type == "chunk")
    assert 1.0 < len(audio) / 48000 < 5.0
    assert {e.context_id for e in events} == {"sse"}


def test_websocket_contexts_share_one_socket_in_the_sdk_default_format(speech_server: str) -> None:
    """Two contexts pushed to and ended with ``no_more_inputs()``, each read with
    ``receive()``; no output format given: the SDK's default, float32 at 44100 Hz."""
    with client(speech_server) as cartesia, cartesia.tts.websocket_connect() as connection:
        first = connection.context(model_id="sonic-3", voice={"id": VOICE})
        second = connection.context(model_id="sonic-3", voice={"id": "am_adam"})
        first.push("The first context speaks ")
        second.push("while the second one ")
        first.push("this sentence.")
        second.push("speaks its own.")
        first.no_more_inputs()
        second.no_more_inputs()
        seconds = {}
        for context in (first, second):
            events = list(context.receive())
            assert events[-1].type == "done", [e.type for e in events]
            seconds[context] = sum(len(e.audio) for e in events if e.type == "chunk") / 4 / 44100
    assert all(1.0 < s < 5.0 for s in seconds.values()), seconds


def test_the_sdk_v2_websocket_helper_returns_a_whole_answer(speech_server: str) -> None:
    """``tts.websocket()``, the SDK's v2-compatible helper: one request, its audio joined."""
    with client(speech_server) as cartesia:
        socket = cartesia.tts.websocket()
        try:
            output = socket.send(model_id="sonic-3", transcript="The older helper.", voice={"id": VOICE},
                                 output_format=RAW, stream=False, add_timestamps=True)
        finally:
            socket.close()
    assert 0.5 < len(output.audio) / 48000 < 4.0
    assert output.word_timestamps["words"] == ["The", "older", "helper."]


async def test_cancel_drops_a_context_at_once(speech_server: str) -> None:
    cancels = await metric(speech_server, CANCELS)
    async with (
        AsyncCartesia(api_key="unused", base_url=speech_server,
                      websocket_base_url=speech_server.replace("http://", "ws://")) as cartesia,
        cartesia.tts.websocket_connect() as connection,
    ):
        context = connection.context(model_id="sonic-3", voice=VOICE, output_format=RAW)
        await context.push("A long answer, sentence after sentence. " * 6)
        events = context.receive()
        first = await asyncio.wait_for(anext(events), 120)
        assert first.type in ("chunk", "timestamps")
        await context.cancel()
        await until_above(speech_server, CANCELS, cancels)
        await until_zero(speech_server, "voicestream_queue_depth")
        after = connection.context(model_id="sonic-3", voice=VOICE, output_format=RAW)
        await after.push("Still here.")
        await after.no_more_inputs()
        kinds = [event.type async for event in after.receive()]
    assert kinds[-1] == "done" and "chunk" in kinds
