"""The ElevenLabs-compatible routes, driven by pipecat's and LiveKit's own ElevenLabs clients
(and httpx and a bare WebSocket for the wire), with the real model and server."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable

import aiohttp
import httpx
import pytest
from tests.server.livekit_harness import stream_then_synthesize
from tests.server.pipecat_harness import running_pipeline
from tests.server.wire import metric, until_above, until_zero
from websockets.asyncio.client import connect

pytestmark = pytest.mark.timeout(300)

VOICE = "af_heart"
CANCELS = 'voicestream_cancels_total{route="elevenlabs"}'
REQUESTS = 'voicestream_requests_total{route="elevenlabs"}'


def ws_url(base_url: str, route: str = "multi-stream-input", output_format: str = "pcm_24000", voice: str = VOICE) -> str:
    base = base_url.replace("http://", "ws://")
    return f"{base}/v1/text-to-speech/{voice}/{route}?model_id=eleven_flash_v2_5&output_format={output_format}"


# --- pipecat ---------------------------------------------------------------------------


async def test_pipecat_speaks_with_word_times_and_an_interruption_cancels_the_context(
    speech_server: str,
) -> None:
    from pipecat.services.elevenlabs.tts import ElevenLabsTTSService

    tts = ElevenLabsTTSService(
        api_key="unused", url=speech_server.replace("http://", "ws://"), sample_rate=24000,
        settings=ElevenLabsTTSService.Settings(voice=VOICE),
        stop_frame_timeout_s=60,  # pipecat ends a context silent for 3 s; a busy CI core can be slower
    )
    async with running_pipeline(tts) as pipeline:
        turns = pipeline.turns
        await pipeline.answer("Hello", " there.", " How are", " you today?")
        context = await turns.next_context(set())
        await asyncio.wait_for(turns.event(turns.stopped, context).wait(), 120)
        assert turns.audio[context] > 48000, "at least a second of 16-bit audio"
        assert turns.words[context] == ["Hello", "there.", "How", "are", "you", "today?"]
        cancels = await metric(speech_server, CANCELS)

        await pipeline.answer(
            "This answer is long on purpose.", " It goes on", " and on, sentence after sentence,",
            " so that the listener interrupts it.", " Nobody hears this part.", end=False,
        )
        interrupted = await turns.next_context({context})
        await pipeline.interrupt()
        await until_above(speech_server, CANCELS, cancels)
        await until_zero(speech_server, "voicestream_queue_depth")
        assert interrupted not in turns.stopped, "the interrupted context never finished"
        assert not turns.errors


async def test_pipecat_http_service_reads_word_times_from_the_timed_stream(speech_server: str) -> None:
    """pipecat's ``ElevenLabsHttpTTSService``: ``/stream/with-timestamps``, one JSON line per chunk."""
    from pipecat.services.elevenlabs.tts import ElevenLabsHttpTTSService

    async with aiohttp.ClientSession() as session:
        tts = ElevenLabsHttpTTSService(
            api_key="unused", base_url=speech_server, aiohttp_session=session, sample_rate=24000,
            settings=ElevenLabsHttpTTSService.Settings(voice=VOICE),
            stop_frame_timeout_s=60,  # pipecat ends a context silent for 3 s; a busy CI core can be slower
        )
        async with running_pipeline(tts) as pipeline:
            turns = pipeline.turns
            context = await pipeline.spoken_answer("Over plain", " HTTP, with", " word times.")
    assert turns.audio[context] > 48000
    assert turns.words[context] == ["Over", "plain", "HTTP,", "with", "word", "times."]
    assert not turns.errors


# --- LiveKit --------------------------------------------------------------------------


async def test_livekit_stream_speaks_before_the_input_ends_and_synthesize_reads_the_stream_route(
    speech_server: str,
) -> None:
    """LiveKit's defaults, unchanged: mp3_22050_32 over multi-stream-input and /stream."""
    from livekit.plugins import elevenlabs

    async with aiohttp.ClientSession() as session:
        tts = elevenlabs.TTS(api_key="unused", base_url=speech_server + "/v1", voice_id=VOICE, http_session=session)
        await stream_then_synthesize(tts, speech_server, REQUESTS, "One whole text, through the stream route.")


# --- the sockets, message by message ----------------------------------------------------


async def _answers(ws, until: Callable[[dict], bool]) -> list[dict]:
    answers: list[dict] = []
    async with asyncio.timeout(120):
        while not answers or not until(answers[-1]):
            answers.append(json.loads(await ws.recv()))
    return answers


def _audio(answers: list[dict], context_id: str | None = None) -> bytes:
    return b"".join(base64.b64decode(a["audio"]) for a in answers if a.get("audio") and a.get("contextId") == context_id)


async def test_bad_messages_each_get_their_error_and_the_socket_goes_on(speech_server: str) -> None:
    bad = [
        "not json", "[1]", json.dumps({"text": "no context"}), json.dumps({"text": 7, "context_id": "x"}),
        json.dumps({"context_id": "x", "flush": "yes"}), json.dumps({"context_id": "never-opened", "flush": True}),
        json.dumps({"text": " ", "context_id": "x", "voice_settings": {"speed": 9.0}}),
    ]
    async with connect(ws_url(speech_server), max_size=None) as ws:
        for message in bad:
            await ws.send(message)
        await ws.send(json.dumps({"text": ""}))  # a keep-alive: no answer
        await ws.send(json.dumps({"context_id": "gone", "close_context": True}))  # raced its isFinal: no answer
        await ws.send(json.dumps({"text": " ", "context_id": "ok"}))
        await ws.send(json.dumps({"text": "Still speaking after all that. ", "context_id": "ok"}))
        await ws.send(json.dumps({"context_id": "ok", "flush": True}))
        await ws.send(json.dumps({"context_id": "ok", "close_context": True}))
        answers = await _answers(ws, lambda a: a.get("isFinal") is True and a.get("contextId") == "ok")
    errors = [a for a in answers if "error" in a]
    assert len(errors) == len(bad), errors
    assert all(error["error"] and error["message"] for error in errors)
    assert errors[-2]["contextId"] == "never-opened" and errors[-1]["error"] == "invalid_speed"
    assert len(_audio(answers, "ok")) > 48000
    timed = [a["alignment"] for a in answers if a.get("contextId") == "ok" and a.get("alignment")]
    assert "".join(c for t in timed for c in t["chars"]).split() == ["Still", "speaking", "after", "all", "that."]


async def test_a_bad_url_gets_its_error_and_a_policy_close(speech_server: str) -> None:
    from websockets.exceptions import ConnectionClosedError

    for url, code in ((ws_url(speech_server, output_format="alaw_8000"), "unsupported_format"),
                      (ws_url(speech_server, voice="no_such_voice"), "unknown_voice")):
        async with connect(url) as ws:
            assert json.loads(await asyncio.wait_for(ws.recv(), 30))["error"] == code
            with pytest.raises(ConnectionClosedError) as closed:
                await asyncio.wait_for(ws.recv(), 30)
        assert closed.value.rcvd.code == 1008


async def test_stream_input_speaks_one_context_and_closes(speech_server: str) -> None:
    """ElevenLabs' realtime form: begin-of-stream, chunks, ``{"text": ""}``; isFinal, then the close."""
    from websockets.exceptions import ConnectionClosedOK

    async with connect(ws_url(speech_server, "stream-input", "pcm_16000"), max_size=None) as ws:
        await ws.send(json.dumps({"text": " ", "try_trigger_generation": True,
                                  "voice_settings": {"stability": 0.5, "similarity_boost": 0.8, "speed": 1.0},
                                  "generation_config": {"chunk_length_schedule": [50]}}))
        for chunk in ("One context ", "per socket. ", "Then the end."):
            await ws.send(json.dumps({"text": chunk, "try_trigger_generation": True}))
        await ws.send(json.dumps({"text": ""}))
        answers = await _answers(ws, lambda a: a.get("isFinal") is True)
        with pytest.raises(ConnectionClosedOK):
            await asyncio.wait_for(ws.recv(), 30)
    assert all("contextId" not in a for a in answers)
    assert 1.5 < len(_audio(answers)) / 2 / 16000 < 6


# --- HTTP --------------------------------------------------------------------------------

TEXT = "Timed, character by character."


def _route(base_url: str, suffix: str = "", voice: str = VOICE) -> str:
    return f"{base_url}/v1/text-to-speech/{voice}{suffix}"


def _assert_aligned(alignment: dict) -> None:
    chars = alignment["characters"]
    starts, ends = alignment["character_start_times_seconds"], alignment["character_end_times_seconds"]
    assert len(chars) == len(starts) == len(ends)
    assert all(s <= e for s, e in zip(starts, ends, strict=True)) and starts == sorted(starts)


async def test_http_routes_answer_each_format_and_time_every_character(speech_server: str) -> None:
    body = {"text": TEXT, "model_id": "eleven_flash_v2_5", "voice_settings": {"stability": 0.5, "speed": 1.0}}
    async with httpx.AsyncClient(timeout=120) as client:
        whole = await client.post(_route(speech_server, "/with-timestamps"), json=body, params={"output_format": "pcm_24000"})
        assert whole.status_code == 200
        answer = whole.json()
        _assert_aligned(answer["alignment"])
        assert "".join(answer["alignment"]["characters"]).strip() == TEXT
        seconds = len(base64.b64decode(answer["audio_base64"])) / 2 / 24000
        assert abs(answer["alignment"]["character_end_times_seconds"][-1] - seconds) < 0.01

        streamed = await client.post(_route(speech_server, "/stream/with-timestamps"), json=body,
                                     params={"output_format": "pcm_24000"})
        lines = [json.loads(line) for line in streamed.text.splitlines() if line]
        for line in lines:
            if line.get("alignment"):
                _assert_aligned(line["alignment"])
        assert "".join(c for line in lines if line.get("alignment") for c in line["alignment"]["characters"]).split() == TEXT.split()
        streamed_audio = b"".join(base64.b64decode(line["audio_base64"]) for line in lines)
        assert abs(len(streamed_audio) / 2 / 24000 - seconds) < 0.3

        for output_format, content_type, bytes_per_second in (
            ("ulaw_8000", "audio/basic", 8000), ("wav_16000", "audio/wav", 32000), ("mp3_44100_128", "audio/mpeg", None),
        ):
            audio = await client.post(_route(speech_server), json=body, params={"output_format": output_format})
            assert audio.status_code == 200 and audio.headers["content-type"].startswith(content_type)
            if bytes_per_second:
                assert abs(len(audio.content) / bytes_per_second - seconds) < 0.3
            assert audio.content


async def test_http_errors_are_typed(make_speech_server: Callable[..., str]) -> None:
    base_url = make_speech_server(api_key="sekret")
    key = {"xi-api-key": "sekret"}
    async with httpx.AsyncClient(timeout=120) as client:
        assert (await client.post(_route(base_url, "/stream"), json={"text": "Keyed."})).status_code == 401
        for url, params, body, code in (
            (_route(base_url, "/stream", "no_such_voice"), {}, {"text": "Hi."}, "unknown_voice"),
            (_route(base_url, "/stream"), {"output_format": "alaw_8000"}, {"text": "Hi."}, "unsupported_format"),
            (_route(base_url), {}, {"text": "  "}, "text_required"),
            (_route(base_url, "/with-timestamps"), {}, {"text": "Hi.", "voice_settings": {"speed": "fast"}}, "invalid_speed"),
        ):
            refused = await client.post(url, json=body, params=params, headers=key)
            assert refused.status_code == 400 and refused.json()["error"]["code"] == code
        keyed = await client.post(_route(base_url, "/stream"), json={"text": "Keyed."}, headers=key)
    assert keyed.status_code == 200 and keyed.content
