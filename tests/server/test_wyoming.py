"""The Wyoming protocol (Home Assistant), driven by the ``wyoming`` package's own client
against the real server and model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe, Info
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


@pytest.fixture
def wyoming_port(make_speech_server: Callable[..., str]) -> int:
    """A server with Wyoming on this port (its HTTP routes on another)."""
    port = free_port()
    make_speech_server(wyoming_port=port)
    return port


async def _read(client: AsyncTcpClient, timeout: float = 120) -> Event:
    event = await asyncio.wait_for(client.read_event(), timeout)
    assert event is not None, "the server closed the connection"
    return event


async def _sentence(client: AsyncTcpClient) -> float:
    """One sentence's audio-start, chunks and audio-stop; returns its seconds."""
    start = await _read(client)
    assert AudioStart.is_type(start.type), start
    seconds = 0.0
    while not AudioStop.is_type((event := await _read(client)).type):
        chunk = AudioChunk.from_event(event)
        assert (chunk.rate, chunk.width, chunk.channels) == (24000, 2, 1)
        seconds += chunk.seconds
    return seconds


async def test_info_lists_every_voice_with_its_language(wyoming_port: int, engine) -> None:
    async with AsyncTcpClient("127.0.0.1", wyoming_port) as wyoming:
        await wyoming.write_event(Describe().event())
        info = Info.from_event(await _read(wyoming))
        (program,) = info.tts
        assert program.supports_synthesize_streaming
        voices = {voice.name: voice.languages for voice in program.voices}
        assert set(voices) == set(engine.voices)
        assert voices["af_heart"] == ["en_US"] and voices["bf_emma"] == ["en_GB"] and voices["ff_siwis"] == ["fr_FR"]


async def test_streamed_text_is_heard_sentence_by_sentence(wyoming_port: int) -> None:
    """The first sentence's audio comes before the second sentence is even sent."""
    async with AsyncTcpClient("127.0.0.1", wyoming_port) as wyoming:
        await wyoming.write_event(SynthesizeStart(voice=SynthesizeVoice(name="af_heart")).event())
        await wyoming.write_event(SynthesizeChunk(text="The first sentence ").event())
        await wyoming.write_event(SynthesizeChunk(text="is here. ").event())
        first = await _sentence(wyoming)
        await wyoming.write_event(SynthesizeChunk(text="And then the second one.").event())
        await wyoming.write_event(Synthesize(text="The first sentence is here. And then the second one.").event())
        await wyoming.write_event(SynthesizeStop().event())
        second = await _sentence(wyoming)
        assert SynthesizeStopped.is_type((await _read(wyoming)).type)
        assert first > 0.8 and second > 0.8


async def test_synthesize_outside_a_stream_is_one_audio_stream(wyoming_port: int) -> None:
    async with AsyncTcpClient("127.0.0.1", wyoming_port) as wyoming:
        voice = SynthesizeVoice(language="fr_FR")
        await wyoming.write_event(Synthesize(text="Bonjour. Ceci est un test.", voice=voice).event())
        assert await _sentence(wyoming) > 1.0
        await wyoming.write_event(Synthesize(text="Hello again.").event())
        assert await _sentence(wyoming) > 0.4


async def test_bad_events_each_get_an_error_and_the_connection_goes_on(wyoming_port: int) -> None:
    async with AsyncTcpClient("127.0.0.1", wyoming_port) as wyoming:
        writer = wyoming._writer
        assert writer is not None
        writer.write(b"this is not json\n")
        writer.write(b'{"type": "synthesize", "data_length": 5}\n[1,2]')
        bad = [
            Event(type="synthesize", data={}),
            Event(type="synthesize", data={"text": 7}),
            Synthesize(text="Hi.", voice=SynthesizeVoice(name="no_such_voice")).event(),
            Synthesize(text="Hi.", voice=SynthesizeVoice(language="xx")).event(),
            SynthesizeChunk(text="no stream open").event(),
            SynthesizeStop().event(),
            Event(type="transcribe", data={}),
            Synthesize(text="word " * 30_000).event(),
        ]
        for event in bad:
            await wyoming.write_event(event)
        errors = [Error.from_event(await _read(wyoming)) for _ in range(len(bad) + 2)]
        assert all(error.text and error.code for error in errors), errors
        assert errors[-1].code == "text_too_long"
        await wyoming.write_event(Synthesize(text="Still here.").event())
        assert await _sentence(wyoming) > 0.4


async def test_oversized_events_end_the_connection_after_their_error(make_speech_server: Callable[..., str]) -> None:
    port = free_port()
    make_speech_server(wyoming_port=port, max_body_bytes=4096)
    async with AsyncTcpClient("127.0.0.1", port) as client:
        assert client._writer is not None
        client._writer.write(json.dumps({"type": "synthesize", "payload_length": 10**9}).encode() + b"\n")
        error = Error.from_event(await _read(client))
        assert "payload_length" in error.text
        assert await asyncio.wait_for(client.read_event(), 30) is None
