"""Markup on every face, through the one text path: a ``<break>`` is that much silence at
that point on the OpenAI route, ``/invocations``, ElevenLabs' and Deepgram's REST routes,
Wyoming, the streaming faces (a tag cut across messages included) and the agent's answers;
``say-as characters`` spells and ``telephone`` reads digit by digit, and an XML bomb is
refused at once while the server goes on answering. Real server on 127.0.0.1, real model."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable

import httpx
import numpy as np
import pytest
from tests.agent.realtime_checks import checked, echo_agent
from tests.pauses import longest_pause_s, quiet_runs, speech_s
from tests.server.wire import WirePeer
from websockets.asyncio.client import connect
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

from voicestream.server import free_port

pytestmark = pytest.mark.timeout(300)

RATE = 24_000
BREAK_TEXT = 'Please hold<break time="700ms"/> while I check.'
SPLIT = ["Please hold<br", 'eak time="70', '0ms"/> while I', " check."]
"""`BREAK_TEXT` as a streaming client may send it: the tag cut across messages."""
BOMB = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10 if i > 1 else "&lol;" * 10}">' for i in range(1, 10))
    + "]><speak>&lol9;</speak>"
)


def _pcm(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768


async def _openai(base: str, text: str) -> bytes:
    async with httpx.AsyncClient(timeout=120) as client:
        answer = await client.post(f"{base}/v1/audio/speech", json={
            "model": "kokoro", "voice": "af_heart", "input": text, "response_format": "pcm"})
    assert answer.status_code == 200, answer.text
    return answer.content


async def _elevenlabs(base: str, text: str) -> bytes:
    async with httpx.AsyncClient(timeout=120) as client:
        answer = await client.post(f"{base}/v1/text-to-speech/af_heart", params={"output_format": "pcm_24000"},
                                   json={"text": text})
    assert answer.status_code == 200, answer.text
    return answer.content


async def _deepgram(base: str, text: str) -> bytes:
    async with httpx.AsyncClient(timeout=120) as client:
        answer = await client.post(f"{base}/v1/speak?model=aura-2-thalia-en&encoding=linear16&container=none"
                                   "&sample_rate=24000", json={"text": text})
    assert answer.status_code == 200, answer.text
    return answer.content


async def _invocations(base: str, text: str) -> bytes:
    async with httpx.AsyncClient(timeout=120) as client:
        answer = await client.post(f"{base}/invocations", json={"text": text, "format": "pcm16"})
    assert answer.status_code == 200, answer.text
    return answer.content


async def _deepgram_split(base: str, _text: str) -> bytes:
    """Deepgram's WebSocket, one ``Speak`` a piece of `SPLIT`, then ``Flush``."""
    audio = bytearray()
    url = base.replace("http://", "ws://") + "/v1/speak?model=aura-2-thalia-en&encoding=linear16&sample_rate=24000"
    async with connect(url, max_size=None) as ws:
        assert json.loads(await ws.recv())["type"] == "Metadata"
        for piece in SPLIT:
            await ws.send(json.dumps({"type": "Speak", "text": piece}))
        await ws.send(json.dumps({"type": "Flush"}))
        async with asyncio.timeout(120):
            while not isinstance(answer := await ws.recv(), str) or json.loads(answer)["type"] != "Flushed":
                if isinstance(answer, bytes):
                    audio += answer
                else:
                    assert json.loads(answer)["type"] not in ("Warning", "Error"), answer
        await ws.send(json.dumps({"type": "Close"}))
    return bytes(audio)


async def _elevenlabs_multi_split(base: str, _text: str) -> bytes:
    """ElevenLabs' ``multi-stream-input``: a context opened, `SPLIT`'s pieces, a flush, its close."""
    audio = bytearray()
    url = base.replace("http://", "ws://") + "/v1/text-to-speech/af_heart/multi-stream-input?output_format=pcm_24000"
    async with connect(url, max_size=None) as ws:
        await ws.send(json.dumps({"text": " ", "context_id": "m"}))
        for piece in SPLIT:
            await ws.send(json.dumps({"text": piece, "context_id": "m"}))
        await ws.send(json.dumps({"context_id": "m", "flush": True}))
        await ws.send(json.dumps({"context_id": "m", "close_context": True}))
        async with asyncio.timeout(120):
            while not (answer := json.loads(await ws.recv())).get("isFinal"):
                assert "error" not in answer, answer
                audio += base64.b64decode(answer.get("audio") or "")
    return bytes(audio)


async def _cartesia_split(base: str, _text: str) -> bytes:
    """Cartesia's WebSocket, the text in `SPLIT`'s pieces, each flushed at once (max_buffer_delay_ms 0)."""
    audio = bytearray()
    output = {"container": "raw", "encoding": "pcm_s16le", "sample_rate": RATE}
    async with connect(base.replace("http://", "ws://") + "/tts/websocket", max_size=None) as ws:
        for piece in SPLIT:
            await ws.send(json.dumps({"context_id": "c", "transcript": piece, "model_id": "sonic-3", "continue": True,
                                      "max_buffer_delay_ms": 0, "voice": {"mode": "id", "id": "af_heart"},
                                      "output_format": output}))
        await ws.send(json.dumps({"context_id": "c", "transcript": "", "continue": False, "model_id": "sonic-3",
                                  "voice": {"mode": "id", "id": "af_heart"}, "output_format": output}))
        async with asyncio.timeout(120):
            while (answer := json.loads(await ws.recv()))["type"] != "done":
                assert answer["type"] != "error", answer
                if answer["type"] == "chunk":
                    audio += base64.b64decode(answer["data"])
    return bytes(audio)


async def _session_split(base: str, _text: str) -> bytes:
    peer = await WirePeer.open(base)
    for piece in SPLIT:
        await peer.send({"text": piece, "request_id": "s", "continue": True})
    await peer.send({"text": "", "request_id": "s", "continue": False})
    answer = await peer.answer(120)
    await peer.close()
    assert answer.last["type"] == "synthesis_complete", answer.last
    return bytes(answer.audio)


FACES = {
    "openai": _openai, "elevenlabs-rest": _elevenlabs, "deepgram-rest": _deepgram,
    "cartesia-split-tag": _cartesia_split, "session-split-tag": _session_split, "invocations": _invocations,
    "deepgram-ws-split-tag": _deepgram_split, "elevenlabs-multi-stream-split-tag": _elevenlabs_multi_split,
}


def _a_700_ms_break_after_the_first_words(audio: np.ndarray) -> None:
    assert abs(longest_pause_s(audio, RATE) - 0.7) <= 0.025
    start, _ = max(quiet_runs(audio, RATE), key=lambda run: run[1])
    assert 0.3 < start < speech_s(audio, RATE) / 2  # after "Please hold", before "while I check"


@pytest.mark.parametrize("face", FACES)
async def test_a_break_is_700_ms_of_silence_at_that_point(speech_server: str, face: str) -> None:
    _a_700_ms_break_after_the_first_words(_pcm(await FACES[face](speech_server, BREAK_TEXT)))


async def _wyoming_audio(wyoming: AsyncTcpClient, until: Callable[[str], bool] = AudioStop.is_type) -> bytes:
    """The audio (24 kHz, 16-bit, mono) of the audio streams that come before the event
    ``until`` accepts: one stream by default; a streamed text's streams, played one after
    another, until ``synthesize-stopped``."""
    audio = bytearray()
    async with asyncio.timeout(120):
        while not until((event := await wyoming.read_event()).type):
            if AudioChunk.is_type(event.type):
                chunk = AudioChunk.from_event(event)
                assert (chunk.rate, chunk.width, chunk.channels) == (RATE, 2, 1)
                audio += chunk.audio
            else:
                assert AudioStart.is_type(event.type) or AudioStop.is_type(event.type), event
    return bytes(audio)


async def test_a_break_on_wyoming_whole_and_streamed(make_speech_server: Callable[..., str]) -> None:
    """Wyoming's ``synthesize`` event, and its streamed form with the tag cut across chunks."""
    port = free_port()
    make_speech_server(wyoming_port=port)
    async with AsyncTcpClient("127.0.0.1", port) as wyoming:
        await wyoming.write_event(Synthesize(text=BREAK_TEXT, voice=SynthesizeVoice(name="af_heart")).event())
        _a_700_ms_break_after_the_first_words(_pcm(await _wyoming_audio(wyoming)))
        await wyoming.write_event(SynthesizeStart(voice=SynthesizeVoice(name="af_heart")).event())
        for piece in SPLIT:
            await wyoming.write_event(SynthesizeChunk(text=piece).event())
        await wyoming.write_event(Synthesize(text=BREAK_TEXT).event())
        await wyoming.write_event(SynthesizeStop().event())
        _a_700_ms_break_after_the_first_words(_pcm(await _wyoming_audio(wyoming, SynthesizeStopped.is_type)))


async def test_an_agents_answer_with_markup_is_spoken_with_its_break(speech_server: str) -> None:
    """The agent passes its LLM's text to the speech server as it is: the echo LLM answers
    with the question's ``<break>`` (streamed a word at a time, the tag cut across deltas),
    and the answer's audio on the Realtime socket holds that silence."""
    with echo_agent(speech_server) as (url, llm):
        async with connect(f"{url}/v1/realtime", max_size=None) as ws:
            events = []
            async with asyncio.timeout(120):
                while (event := checked(json.loads(await ws.recv())))["type"] != "session.created":
                    pass
                item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": BREAK_TEXT}]}
                await ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
                await ws.send(json.dumps({"type": "response.create"}))
                while (event := checked(json.loads(await ws.recv())))["type"] != "response.done":
                    events.append(event)
    assert event["response"]["status"] == "completed", event
    assert BREAK_TEXT.rstrip(".") in event["response"]["output"][0]["content"][0]["transcript"]
    assert any(BREAK_TEXT.rstrip(".") in str(request["messages"]) for request in llm.requests)
    pcm = b"".join(base64.b64decode(e["delta"]) for e in events if e["type"] == "response.output_audio.delta")
    _a_700_ms_break_after_the_first_words(_pcm(pcm))


async def test_say_as_characters_spells_the_word(speech_server: str) -> None:
    spelled = _pcm(await _openai(speech_server, '<speak><say-as interpret-as="characters">Kokoro</say-as></speak>'))
    word = _pcm(await _openai(speech_server, "Kokoro"))
    assert speech_s(spelled, RATE) > 1.6 * speech_s(word, RATE)


async def test_say_as_telephone_reads_digit_by_digit(speech_server: str) -> None:
    """A telephone number is its digits one by one, its groups apart: the model receives the
    phonemes of the digits written as words (not "five hundred fifty-five"), and says them."""
    telephone = 'Call <say-as interpret-as="telephone">555-1234</say-as> now.'
    written = "Call five five five, one two three four now."
    async with httpx.AsyncClient(timeout=120) as client:
        phonemes = [(await client.post(f"{speech_server}/dev/phonemize", json={"text": text})).json()["phonemes"]
                    for text in (telephone, written, "Call 555-1234 now.")]
    assert phonemes[0] == phonemes[1] and phonemes[0].count("fˈaɪv") == 3
    assert "hˈʌndɹɪd" in phonemes[2]  # without the markup, a number
    assert await _openai(speech_server, telephone) == await _openai(speech_server, written)


async def test_several_documents_in_one_stream_are_each_spoken(speech_server: str) -> None:
    """Streamed text holding two ``<speak>`` documents back to back (cut anywhere across
    messages): each is read as a document of its own, its break heard, not refused as one
    malformed document."""
    text = '<speak>Please hold<break time="700ms"/> while I check.</speak><speak>Thanks.</speak>'
    peer = await WirePeer.open(speech_server)
    for start in range(0, len(text), 9):
        await peer.send({"text": text[start : start + 9], "request_id": "d", "continue": True})
    await peer.send({"text": "", "request_id": "d", "continue": False})
    answer = await peer.answer(120)
    await peer.close()
    assert answer.last["type"] == "synthesis_complete", answer.last
    audio = _pcm(bytes(answer.audio))
    assert abs(longest_pause_s(audio, RATE) - 0.7) <= 0.025
    assert speech_s(audio, RATE) > speech_s(_pcm(await _openai(speech_server, BREAK_TEXT)), RATE)  # and "Thanks."


async def test_a_split_tag_keeps_the_writers_words_and_offsets(speech_server: str) -> None:
    peer = await WirePeer.open(speech_server)
    for index, piece in enumerate(SPLIT):
        await peer.send({"text": piece, "request_id": "w", "continue": True, "word_timestamps": index == 0})
    await peer.send({"text": "", "request_id": "w", "continue": False})
    answer = await peer.answer(120)
    await peer.close()
    words = [w for frame in answer.frames if frame["type"] == "word_timestamps" for w in frame["words"]]
    assert [w["word"] for w in words] == ["Please", "hold", "while", "I", "check."]
    sent = "".join(SPLIT)
    assert all(sent[w["start_char"] : w["end_char"]] == w["word"] for w in words)


async def test_an_xml_bomb_is_refused_at_once_and_the_server_goes_on(speech_server: str) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        assert (await client.get(f"{speech_server}/ping")).status_code == 200
        took = []
        for _ in range(3):  # the best of three: a scheduling hiccup on a shared core is not the parser
            started = time.perf_counter()
            refused = await client.post(f"{speech_server}/v1/audio/speech", json={
                "model": "kokoro", "voice": "af_heart", "input": BOMB, "response_format": "pcm"})
            took.append(time.perf_counter() - started)
            assert refused.status_code == 400
            assert "DTD" in refused.text
        assert min(took) < 0.05, took
        invocations = await client.post(f"{speech_server}/invocations", json={"text": BOMB})
        assert (await client.get(f"{speech_server}/ping")).status_code == 200
    assert invocations.status_code == 400 and invocations.json()["error"]["code"] == "invalid_markup"
    peer = await WirePeer.open(speech_server)
    await peer.send({"text": '<speak>Hello <break time="11s"/></speak>', "request_id": "b"})
    error = (await peer.answer()).last
    await peer.close()
    assert error["type"] == "error" and error["code"] == "invalid_markup" and "column" in error["message"]
