"""`SageMakerTransport` through `FakeSageMakerRuntimeClient`: the SDK's real event types on
the AWS hop, the real speech server behind it."""

from __future__ import annotations

import json

import pytest
from aws_sdk_sagemaker_runtime_http2.models import (
    ResponseStreamEventModelStreamError,
    ResponseStreamEventPayloadPart,
)
from tests.client.fake_sagemaker import FakeSageMakerRuntimeClient

from voicestream.client import (
    AudioChunk,
    ConnectionLostError,
    SageMakerTransport,
    SpeechCompleted,
    SpeechEvent,
    SpeechFailed,
    SpeechSession,
    SpeechStarted,
)


async def test_a_session_through_sagemaker_speaks_streamed_text(warm_server: str) -> None:
    sagemaker = FakeSageMakerRuntimeClient(warm_server)
    transport = SageMakerTransport(
        "kokoro-82m",
        "us-east-1",
        client=sagemaker,
        model_invocation_path="invocations-bidirectional-stream",
    )
    async with await SpeechSession.connect(transport) as session:
        events = [event async for event in session.speak(["Hello ", "there. ", "Bye", " now."])]

    assert len([e for e in events if isinstance(e, SpeechStarted)]) == 1
    (done,) = [e for e in events if isinstance(e, SpeechCompleted)]
    audio = b"".join(e.data for e in events if isinstance(e, AudioChunk))
    assert len(audio) == done.audio_bytes > 0

    (invocation,) = sagemaker.invocations
    assert invocation.endpoint_name == "kokoro-82m"
    assert invocation.model_invocation_path == "invocations-bidirectional-stream"
    sent = [json.loads(event.value.bytes_) for event in sagemaker.sent]
    assert [(m["type"], m.get("text"), m.get("continue")) for m in sent] == [
        ("synthesize", "Hello ", True), ("synthesize", "there. ", True), ("synthesize", "Bye", True),
        ("synthesize", " now.", True), ("synthesize", "", False), ("close", None, None),
    ]
    assert {event.value.data_type for event in sagemaker.sent} == {"UTF8"}
    received = sagemaker.outputs[0].events
    assert all(isinstance(e, ResponseStreamEventPayloadPart) for e in received)
    assert {e.value.data_type for e in received} == {"UTF8", "BINARY"}


async def test_payloads_split_into_partial_parts_are_reassembled(warm_server: str) -> None:
    sagemaker = FakeSageMakerRuntimeClient(warm_server, split_payloads_over=1000)
    reference: list[SpeechEvent] = []
    async with await SpeechSession.connect(warm_server) as session:
        reference = [event async for event in session.speak(["Same words."])]
    async with await SpeechSession.connect(
        SageMakerTransport("kokoro-82m", client=sagemaker)
    ) as session:
        events = [event async for event in session.speak(["Same words."])]

    assert any(e.value.completion_state == "PARTIAL" for e in sagemaker.outputs[0].events)
    assert [type(e) for e in events if not isinstance(e, AudioChunk)] == [
        SpeechStarted,
        SpeechCompleted,
    ]

    def audio(of: list[SpeechEvent]) -> bytes:
        return b"".join(e.data for e in of if isinstance(e, AudioChunk))

    assert len(audio(events)) == len(audio(reference)) > 0


async def test_a_model_stream_error_fails_pending_requests_and_ends_the_session(
    warm_server: str,
) -> None:
    sagemaker = FakeSageMakerRuntimeClient(warm_server)
    session = await SpeechSession.connect(SageMakerTransport("kokoro-82m", client=sagemaker))
    pending = await session.submit("Cut off.")
    await sagemaker.crash_container()

    events: list[SpeechEvent] = []
    with pytest.raises(ConnectionLostError, match="model stream failed"):
        async for event in session.events():
            events.append(event)
    assert isinstance(sagemaker.outputs[0].events[-1], ResponseStreamEventModelStreamError)
    failed = [e for e in events if isinstance(e, SpeechFailed)]
    assert [(e.request_id, type(e.error)) for e in failed] == [(pending, ConnectionLostError)]
    await session.close()
