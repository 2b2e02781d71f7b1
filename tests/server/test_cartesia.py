"""The Cartesia-compatible routes, driven by pipecat's and LiveKit's own Cartesia clients
(and LiveKit's OpenAI client on the OpenAI route), with the real model and server."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable

import aiohttp
import httpx
import pytest
from tests.server.livekit_harness import stream_then_synthesize
from tests.server.pipecat_harness import Turns as _Turns  # noqa: F401 - test_deepgram imports it from here
from tests.server.pipecat_harness import pipecat_sink as _pipecat_sink  # noqa: F401 - likewise
from tests.server.pipecat_harness import running_pipeline
from websockets.asyncio.client import connect

pytestmark = pytest.mark.timeout(300)

VOICE = "af_heart"
CANCELS = 'voicestream_cancels_total{route="cartesia"}'
REQUESTS = 'voicestream_requests_total{route="cartesia"}'


async def metric(base_url: str, name: str) -> float:
    """A value of /metrics; a labelled counter never counted yet is 0."""
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"{base_url}/metrics")).text
    values = [line.split()[1] for line in text.splitlines() if line.startswith(name + " ")]
    return float(values[0]) if values else 0.0


def ws_url(base_url: str) -> str:
    return base_url.replace("http://", "ws://") + "/tts/websocket"


# --- pipecat ---------------------------------------------------------------------------


async def test_pipecat_speaks_two_turns_and_an_interruption_cancels_the_context(
    make_speech_server: Callable[..., str],
) -> None:
    from pipecat.services.cartesia.tts import CartesiaTTSService

    base_url = make_speech_server()
    tts = CartesiaTTSService(
        api_key="unused", url=ws_url(base_url), sample_rate=24000,
        settings=CartesiaTTSService.Settings(voice=VOICE),
        stop_frame_timeout_s=60,  # pipecat ends a context silent for 3 s; a busy CI core can be slower
    )
    async with running_pipeline(tts) as pipeline:
        turns, answer = pipeline.turns, pipeline.answer
        seen: set[str] = set()
        for tokens in (("Hello", " there.", " How are", " you today?"), ("The second", " turn", " is short.")):
            await answer(*tokens)
            context = await turns.next_context(seen)
            seen.add(context)
            await asyncio.wait_for(turns.stopped.setdefault(context, asyncio.Event()).wait(), 120)
            assert turns.audio[context] > 24000, "each turn is at least half a second of 16-bit audio"
        cancels = await metric(base_url, CANCELS)

        await answer(
            "This answer is long on purpose.", " It goes on", " and on, sentence after sentence,",
            " so that the listener interrupts it.", " Nobody hears this part.", end=False,
        )
        interrupted = await turns.next_context(seen)
        await pipeline.interrupt()
        async with asyncio.timeout(60):
            while await metric(base_url, CANCELS) < cancels + 1:
                await asyncio.sleep(0.05)
            while await metric(base_url, "voicestream_queue_depth") > 0:
                await asyncio.sleep(0.05)
        assert interrupted not in turns.stopped, "the interrupted context never finished"
        assert not turns.errors


# --- LiveKit --------------------------------------------------------------------------


async def test_livekit_stream_speaks_before_the_input_ends_and_synthesize_uses_bytes(
    make_speech_server: Callable[..., str],
) -> None:
    from livekit.plugins import cartesia

    base_url = make_speech_server()
    async with aiohttp.ClientSession() as session:
        tts = cartesia.TTS(api_key="unused", base_url=base_url, voice=VOICE, http_session=session)
        await stream_then_synthesize(tts, base_url, REQUESTS, "One whole text, through the bytes route.")


@pytest.mark.parametrize("response_format", ["mp3", "wav", "pcm"])
async def test_livekit_openai_tts_reads_the_openai_route(speech_server: str, response_format: str) -> None:
    from livekit.plugins import openai

    tts = openai.TTS(base_url=speech_server + "/v1", api_key="unused", model="tts-1", voice=VOICE,
                     response_format=response_format)
    frames = [event.frame async for event in tts.synthesize("Checking the OpenAI route.")]
    await tts.aclose()
    assert frames and frames[0].sample_rate == 24000
    assert 0.8 < sum(frame.duration for frame in frames) < 5.0


# --- the wire, message by message -------------------------------------------------------

FORMAT = {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}


def _message(context_id: str, transcript: str, **extra: object) -> str:
    return json.dumps({"context_id": context_id, "transcript": transcript, "model_id": "sonic-3",
                       "voice": {"mode": "id", "id": VOICE}, "output_format": FORMAT, **extra})


async def _until_done(ws, context_id: str) -> tuple[list[dict], bytes]:
    """Every answer up to ``context_id``'s done (answers of other contexts included)."""
    answers: list[dict] = []
    audio = bytearray()
    async with asyncio.timeout(120):
        while True:
            answer = json.loads(await ws.recv())
            answers.append(answer)
            if answer["type"] == "chunk" and answer["context_id"] == context_id:
                audio += base64.b64decode(answer["data"])
            if answer["type"] == "done" and answer["context_id"] == context_id:
                return answers, bytes(audio)


@pytest.mark.parametrize(("encoding", "rate", "bytes_per_sample"), [
    ("pcm_s16le", 24000, 2), ("pcm_f32le", 16000, 4), ("pcm_mulaw", 8000, 1),
])
async def test_output_formats_at_requested_rates(speech_server: str, encoding: str, rate: int, bytes_per_sample: int) -> None:
    output = {"container": "raw", "encoding": encoding, "sample_rate": rate}
    async with connect(ws_url(speech_server), max_size=None) as ws:
        await ws.send(_message("f", "A short check of the format.", output_format=output))
        _, audio = await _until_done(ws, "f")
    seconds = len(audio) / bytes_per_sample / rate
    assert 1.0 < seconds < 4.0
    body = json.loads(_message("b", "A short check of the format.", output_format=output))
    async with httpx.AsyncClient(timeout=120) as client:
        answer = await client.post(speech_server + "/tts/bytes", json=body, headers={"Cartesia-Version": "2025-04-16"})
    assert answer.status_code == 200
    assert abs(len(answer.content) / bytes_per_sample / rate - seconds) < 0.3


async def test_flush_and_buffer_delay_speak_undecided_text(speech_server: str) -> None:
    """Text the chunker cannot cut yet (no next word) is spoken after max_buffer_delay_ms,
    and an explicit flush is answered flush_done after that text's audio."""
    async with connect(ws_url(speech_server), max_size=None) as ws:
        await ws.send(_message("d", "Waiting for the next word.", **{"continue": True, "max_buffer_delay_ms": 200}))
        first = json.loads(await asyncio.wait_for(ws.recv(), 120))
        assert first["type"] == "chunk" and first["context_id"] == "d"
        await ws.send(_message("d", "A flushed sentence.", **{"continue": True, "flush": True}))
        await ws.send(_message("d", "", **{"continue": False}))
        answers, _ = await _until_done(ws, "d")
    kinds = [answer["type"] for answer in answers]
    assert kinds.index("flush_done") > kinds.index("chunk")
    assert kinds[-1] == "done"


async def test_bad_messages_each_get_their_error_and_the_socket_goes_on(speech_server: str) -> None:
    """Fuzz of the WebSocket: bad JSON, bad fields, unknown contexts, cancel storms and huge
    transcripts each get an error (or, for cancels, nothing); a good context still speaks."""
    bad = [
        "not json", "[1, 2]", json.dumps({"transcript": "no context"}),
        _message("x", "hi", voice={"mode": "embedding", "embedding": [0.1]}),
        _message("x", "hi", voice={"mode": "id", "id": "no_such_voice"}),
        _message("x", "hi", output_format={"container": "raw", "encoding": "pcm_alaw", "sample_rate": 24000}),
        _message("x", "hi", output_format={"container": "raw", "encoding": "pcm_s16le", "sample_rate": 12345}),
        _message("x", "hi", output_format={"container": "mp3"}),
        _message("x", "hi", max_buffer_delay_ms=-1), _message("x", "hi", language="xx"),
        _message("x", "hi", generation_config={"speed": "fast"}), _message("x", 7),
        json.dumps({"context_id": "never-opened", "flush": True}),
        _message("huge", "word " * 30_000, **{"continue": True}),
    ]
    async with connect(ws_url(speech_server), max_size=None) as ws:
        for message in bad:
            await ws.send(message)
        for index in range(200):
            await ws.send(json.dumps({"context_id": f"storm-{index % 3}", "cancel": True}))
        await ws.send(_message("ok", "Still speaking after all that."))
        await ws.send(_message("ok", "Too late: the context was ended."))
        answers, audio = await _until_done(ws, "ok")
    errors = [answer for answer in answers if answer["type"] == "error"]
    assert len(errors) == len(bad) + 1, [error["error"] for error in errors]
    assert all(error["code"] and error["error"] and "done" not in error for error in errors)
    assert {error["context_id"] for error in errors[-3:]} == {"never-opened", "huge", "ok"}
    assert len(audio) > 24000


async def test_an_api_key_is_checked_from_x_api_key(make_speech_server: Callable[..., str]) -> None:
    base_url = make_speech_server(api_key="sekret")
    body = json.loads(_message("k", "Keyed."))
    async with httpx.AsyncClient(timeout=120) as client:
        assert (await client.post(base_url + "/tts/bytes", json=body)).status_code == 401
        assert (await client.post(base_url + "/tts/bytes", json=body, headers={"X-API-Key": "wrong"})).status_code == 401
        keyed = await client.post(base_url + "/tts/bytes", json=body, headers={"X-API-Key": "sekret"})
    assert keyed.status_code == 200 and keyed.content
    async with connect(ws_url(base_url), additional_headers={"X-API-Key": "sekret"}) as ws:
        await ws.send(_message("k", "Keyed."))
        _, audio = await _until_done(ws, "k")
    assert audio


async def test_an_idle_socket_is_closed_once_its_audio_is_out(make_speech_server: Callable[..., str]) -> None:
    from websockets.exceptions import ConnectionClosedOK

    base_url = make_speech_server(idle_timeout_s=1.0)
    async with connect(ws_url(base_url), max_size=None) as ws:
        await ws.send(_message("i", "A sentence that takes longer than a second to say."))
        _, audio = await _until_done(ws, "i")
        with pytest.raises(ConnectionClosedOK):
            await asyncio.wait_for(ws.recv(), 30)
    assert len(audio) / 48000 > 1.0


async def test_add_timestamps_times_every_word_before_its_audio(speech_server: str) -> None:
    """Cartesia's ``timestamps`` answers: every word of a context streamed in pieces, in
    order, each batch before the audio it times, counted from the start of the context."""
    text = "Timestamps come first, then audio. A second sentence follows them."
    async with connect(ws_url(speech_server), max_size=None) as ws:
        pieces = text.split(" ")
        for index, word in enumerate(pieces):
            more = index < len(pieces) - 1
            await ws.send(_message("t", word + (" " if more else ""), **{"continue": more, "add_timestamps": True}))
        answers, _ = await _until_done(ws, "t")
    kinds = [answer["type"] for answer in answers]
    assert kinds.index("timestamps") < kinds.index("chunk")
    stamps = [a["word_timestamps"] for a in answers if a["type"] == "timestamps"]
    assert [w for s in stamps for w in s["words"]] == pieces
    starts = [t for s in stamps for t in s["start"]]
    assert starts == sorted(starts) and starts[0] >= 0
