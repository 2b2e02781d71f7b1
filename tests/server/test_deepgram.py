"""The Deepgram-compatible routes, driven by pipecat's and LiveKit's own Deepgram clients, with
the real model and server; the wire message by message with a plain WebSocket and httpx."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import aiohttp
import httpx
import pytest
from tests.server.pipecat_harness import running_pipeline
from tests.server.wire import metric, until_above, until_zero
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

pytestmark = pytest.mark.timeout(300)

CANCELS = 'voicestream_cancels_total{route="deepgram"}'
REQUESTS = 'voicestream_requests_total{route="deepgram"}'


def speak_url(base_url: str, query: str = "") -> str:
    return base_url.replace("http://", "ws://") + "/v1/speak" + (f"?{query}" if query else "")


async def test_pipecat_speaks_an_answer_and_a_clear_stops_the_next(speech_server: str) -> None:
    from pipecat.services.deepgram.tts import DeepgramTTSService

    tts = DeepgramTTSService(
        api_key="unused", base_url=speech_server.replace("http://", "ws://"), sample_rate=24000,
        settings=DeepgramTTSService.Settings(voice="aura-2-helena-en"),
        stop_frame_timeout_s=60,  # pipecat drops audio that comes 3 s after the last: a loaded core can be slower
    )
    async with running_pipeline(tts) as pipeline:
        turns = pipeline.turns
        await pipeline.answer("Hello there.", " How are", " you today?")
        spoken = await turns.next_context(set())
        await asyncio.wait_for(turns.event(turns.stopped, spoken).wait(), 120)  # Flushed
        assert turns.audio[spoken] > 48000, "the answer is at least a second of 16-bit audio"
        cancels = await metric(speech_server, CANCELS)

        await pipeline.answer(
            "This answer is long on purpose.", " It goes on", " and on, sentence after sentence,",
            " so that the listener interrupts it.", " Nobody hears this part.", end=False,
        )
        interrupted = await turns.next_context({spoken})
        await pipeline.interrupt()  # pipecat sends Clear
        await until_above(speech_server, CANCELS, cancels)
        await until_zero(speech_server, "voicestream_queue_depth")
        assert interrupted not in turns.stopped, "no Flushed came for the interrupted answer"
        assert not turns.errors


async def test_pipecat_http_service_speaks_over_the_rest_route(speech_server: str) -> None:
    """pipecat's ``DeepgramHttpTTSService``: ``POST /v1/speak?container=none`` per sentence, raw linear16."""
    from pipecat.services.deepgram.tts import DeepgramHttpTTSService

    requests = await metric(speech_server, REQUESTS)
    async with aiohttp.ClientSession() as session:
        tts = DeepgramHttpTTSService(
            api_key="unused", base_url=speech_server, aiohttp_session=session, sample_rate=24000,
            settings=DeepgramHttpTTSService.Settings(voice="aura-2-helena-en"),
            stop_frame_timeout_s=60,  # pipecat ends a context silent for 3 s; a busy CI core can be slower
        )
        async with running_pipeline(tts) as pipeline:
            turns = pipeline.turns
            context = await pipeline.spoken_answer("Over plain", " HTTP, to", " Deepgram's route.")
    assert turns.audio[context] > 48000, "the answer is at least a second of 16-bit audio"
    assert await metric(speech_server, REQUESTS) > requests
    assert not turns.errors


async def test_livekit_stream_and_synthesize(speech_server: str) -> None:
    from livekit.plugins import deepgram

    async with aiohttp.ClientSession() as session:
        tts = deepgram.TTS(api_key="unused", base_url=speech_server + "/v1/speak", model="aura-2-andromeda-en",
                           http_session=session)
        stream = tts.stream()  # one Speak per word, then Flush
        for token in "The first words are spoken soon. Then the rest of it.".replace(" ", " \0").split("\0"):
            stream.push_text(token)
        stream.end_input()
        frames = [event.frame async for event in stream]
        await stream.aclose()
        assert 2.0 < sum(frame.duration for frame in frames) < 8.0

        requests = await metric(speech_server, REQUESTS)
        frames = [event.frame async for event in tts.synthesize("One whole text, over HTTP.")]
        assert frames[0].sample_rate == 24000
        assert 1.0 < sum(frame.duration for frame in frames) < 5.0
        assert await metric(speech_server, REQUESTS) == requests + 1
        await tts.aclose()


@pytest.mark.parametrize(("query", "bytes_per_second"), [
    ("encoding=linear16&container=none&sample_rate=16000", 32000),
    ("encoding=mulaw&sample_rate=8000", 8000),
    ("encoding=alaw", 8000),
])
async def test_rest_streams_each_raw_encoding_at_its_rate(speech_server: str, query: str, bytes_per_second: int) -> None:
    async with httpx.AsyncClient(timeout=120) as client:
        answer = await client.post(f"{speech_server}/v1/speak?model=aura-2-thalia-en&{query}",
                                   json={"text": "A short check of the encoding."})
    assert answer.status_code == 200, answer.text
    assert answer.headers["dg-model-name"] == "aura-2-thalia-en"
    assert 1.0 < len(answer.content) / bytes_per_second < 4.0


async def test_rest_refusals_are_deepgram_errors_and_a_token_is_a_key(make_speech_server: Callable[..., str]) -> None:
    base_url = make_speech_server(api_key="sekret")
    token = {"Authorization": "Token sekret"}
    async with httpx.AsyncClient(timeout=120) as client:
        assert (await client.post(base_url + "/v1/speak", json={"text": "Hi."})).status_code == 401
        unknown = await client.post(base_url + "/v1/speak?model=aura-2-nobody-en", json={"text": "Hi."}, headers=token)
        no_text = await client.post(base_url + "/v1/speak", json={"url": "https://example.com/a.txt"}, headers=token)
        mp3 = await client.post(base_url + "/v1/speak?model=af_heart", json={"text": "Keyed."}, headers=token)
    assert unknown.status_code == 400 and unknown.json()["err_code"] == "unknown_voice"
    assert "aura-2-nobody-en" in unknown.headers["dg-error"]
    assert no_text.status_code == 400 and no_text.json()["err_code"] == "text_required"
    assert mp3.status_code == 200 and mp3.headers["content-type"] == "audio/mpeg" and mp3.content


async def test_bad_messages_get_warnings_and_the_socket_goes_on(speech_server: str) -> None:
    bad = ["not json", "[1]", json.dumps({"type": "Shout", "text": "hi"}), json.dumps({"type": "Speak"}),
           json.dumps({"type": "Speak", "text": 7}), json.dumps({"type": "Speak", "text": "word " * 30_000})]
    async with connect(speak_url(speech_server, "model=am_adam&encoding=linear16&sample_rate=24000")) as ws:
        metadata = json.loads(await ws.recv())
        assert metadata["type"] == "Metadata" and metadata["model_name"] == "am_adam"
        for message in bad:
            await ws.send(message)
        await ws.send(json.dumps({"type": "Speak", "text": "Still speaking after all that."}))
        await ws.send(json.dumps({"type": "Flush"}))
        warnings, audio = [], 0
        async with asyncio.timeout(120):
            while (answer := await ws.recv()) and not (isinstance(answer, str) and '"Flushed"' in answer):
                if isinstance(answer, bytes):
                    audio += len(answer)
                else:
                    warnings.append(json.loads(answer))
        await ws.send(json.dumps({"type": "Close"}))
        await asyncio.wait_for(ws.wait_closed(), 30)
    assert [w["type"] for w in warnings] == ["Warning"] * len(bad)
    assert all(w["warn_code"] and w["warn_msg"] for w in warnings)
    assert warnings[-1]["warn_code"] == "text_too_long"  # the text so far failed; what follows is spoken
    assert audio > 48000
    assert ws.close_code == 1000


async def test_a_query_the_socket_cannot_serve_is_refused_at_the_handshake(speech_server: str) -> None:
    for query, reason in (("model=aura-2-nobody-en", "aura-2-nobody-en"), ("encoding=mp3", "linear16"),
                          ("sample_rate=12345", "sample_rate"), ("model=xx_nobody", "xx_nobody")):
        with pytest.raises(InvalidStatus) as refused:
            async with connect(speak_url(speech_server, query)):
                pass
        assert refused.value.response.status_code == 400
        assert reason in refused.value.response.headers["dg-error"]
