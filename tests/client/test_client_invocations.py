"""`InvocationsClient` and `AsyncInvocationsClient` against the real server's `POST /invocations`."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from voicestream.client import (
    AsyncInvocationsClient,
    ConnectionLostError,
    InvalidRequestError,
    InvocationsClient,
    SpeechBusyError,
)
from voicestream.server import free_port


def test_stream_gives_the_raw_wav_body_as_it_arrives(warm_server: str) -> None:
    with InvocationsClient(warm_server) as client:
        chunks = list(client.stream("Hello there."))
    body = b"".join(chunks)
    assert body[:4] == b"RIFF" and body[8:12] == b"WAVE"
    (sample_rate,) = struct.unpack("<I", body[24:28])
    assert sample_rate == 24000
    assert len(body) > 44 + 24000  # more than half a second of 16-bit audio


def test_stream_events_decodes_sse_audio_then_the_completion(warm_server: str) -> None:
    with InvocationsClient(warm_server) as client:
        raw = b"".join(client.stream("Hello there.", format="pcm16"))
        items = list(client.stream_events("Hello there.", format="pcm16"))
    *audio, completion = items
    assert all(isinstance(chunk, bytes) for chunk in audio)
    assert isinstance(completion, dict) and completion["type"] == "synthesis_complete"
    assert completion["audio_bytes"] == len(b"".join(audio)) == len(raw)  # type: ignore[arg-type]


async def test_async_client_streams_raw_and_sse(warm_server: str) -> None:
    async with AsyncInvocationsClient(warm_server) as client:
        raw = b"".join([chunk async for chunk in client.stream("Okay.", format="pcm16")])
        items = [item async for item in client.stream_events("Okay.", format="pcm16")]
    assert isinstance(items[-1], dict)
    assert items[-1]["audio_bytes"] == len(raw) > 0


@pytest.mark.parametrize("events", [False, True], ids=["raw", "sse"])
def test_a_refused_request_raises_the_matching_error(warm_server: str, events: bool) -> None:
    with InvocationsClient(warm_server) as client:
        read = client.stream_events if events else client.stream
        with pytest.raises(InvalidRequestError) as refused:
            list(read("Hello.", voice="xx_nobody"))
    assert refused.value.code == "unknown_voice"
    assert refused.value.message


async def test_async_client_maps_errors_too(warm_server: str) -> None:
    async with AsyncInvocationsClient(warm_server) as client:
        with pytest.raises(InvalidRequestError) as refused:
            [chunk async for chunk in client.stream("Too fast.", speed=9.0)]
    assert refused.value.code == "invalid_speed"


def test_a_full_queue_is_busy(make_speech_server: Callable[..., str]) -> None:
    url = make_speech_server(max_queue=0)
    with InvocationsClient(url) as client, pytest.raises(SpeechBusyError):
        list(client.stream("Hello."))


def test_no_server_is_a_connection_error() -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    with InvocationsClient(nowhere) as client, pytest.raises(ConnectionLostError):
        list(client.stream("Hello."))
