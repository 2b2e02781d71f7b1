"""The agent's Realtime endpoint driven by the openai SDK's own client, unchanged
(`AsyncOpenAI(websocket_base_url=...).realtime.connect()`): a typed turn and a spoken one,
against the real agent, speech server and Whisper, with an echo LLM; every server event is
validated against the SDK's models."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from openai import AsyncOpenAI
from tests.agent.realtime_checks import b64, checked, chunks, echo_agent, silence, spoken

ANSWER_EVENTS = [
    "response.created",
    "response.output_item.added",
    "conversation.item.added",
    "response.content_part.added",
]
CLOSING_EVENTS = [
    "response.output_audio.done",
    "response.output_audio_transcript.done",
    "response.content_part.done",
    "response.output_item.done",
    "conversation.item.done",
    "response.done",
]


@pytest.fixture(scope="module")
def agent(speech_server: str) -> Iterator[tuple[str, Any]]:
    with echo_agent(speech_server) as running:
        yield running


async def until(connection: Any, last: str, seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Server events (validated) up to and including the first of type `last`."""
    async with asyncio.timeout(120):
        while True:
            event = checked(json.loads(await connection.recv_bytes()))
            seen.append(event)
            if event["type"] == last:
                return seen


def answer_parts(events: list[dict[str, Any]]) -> tuple[bytes, str, str]:
    """The answer's audio, its transcript deltas joined, and its final transcript."""
    audio = b"".join(
        base64.b64decode(e["delta"]) for e in events if e["type"] == "response.output_audio.delta"
    )
    deltas = "".join(
        e["delta"] for e in events if e["type"] == "response.output_audio_transcript.delta"
    )
    done = next(e for e in events if e["type"] == "response.output_audio_transcript.done")
    return audio, deltas, done["transcript"]


async def test_the_openai_sdk_has_a_typed_turn_then_a_spoken_one(agent, speech_server):
    url, _ = agent
    client = AsyncOpenAI(api_key="unused", websocket_base_url=f"{url}/v1")
    async with client.realtime.connect(model="gpt-realtime") as connection:
        created = await until(connection, "session.created", [])
        assert created[-1]["session"]["type"] == "realtime"
        await connection.session.update(
            session={
                "type": "realtime",
                "instructions": "Answer briefly.",
                "audio": {"input": {"turn_detection": None}, "output": {"voice": "alloy"}},
            }
        )
        updated = (await until(connection, "session.updated", []))[-1]["session"]
        assert updated["audio"]["input"]["turn_detection"] is None
        assert updated["audio"]["output"]["voice"] == "alloy"

        await connection.conversation.item.create(
            item={
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Hello there"}],
            }
        )
        await connection.response.create()
        events = await until(connection, "response.done", [])
        kinds = [e["type"] for e in events]
        assert kinds[:2] == ["conversation.item.added", "conversation.item.done"]
        assert [k for k in kinds[2:] if k in ANSWER_EVENTS] == ANSWER_EVENTS
        assert kinds[-len(CLOSING_EVENTS) :] == CLOSING_EVENTS
        audio, deltas, transcript = answer_parts(events)
        assert transcript == "You said: Hello there. I was sent 1 messages."
        assert deltas == transcript
        assert len(audio) > 24000  # over half a second of pcm16 at 24 kHz
        assert events[-1]["response"]["status"] == "completed"

        # The spoken turn: server VAD finds it, Whisper hears it, the echo answers it.
        await connection.session.update(
            session={
                "type": "realtime",
                "audio": {"input": {"turn_detection": {"type": "server_vad"}}},
            }
        )
        await until(connection, "session.updated", [])
        question = (
            silence(0.5) + spoken(speech_server, "What is the capital of France?") + silence(1.0)
        )
        for piece in chunks(question):
            await connection.input_audio_buffer.append(audio=b64(piece))
        events = await until(connection, "response.done", [])
        kinds = [e["type"] for e in events]
        assert kinds.index("input_audio_buffer.speech_started") < kinds.index(
            "input_audio_buffer.speech_stopped"
        )
        heard = next(
            e
            for e in events
            if e["type"] == "conversation.item.input_audio_transcription.completed"
        )
        assert "capital of france" in heard["transcript"].lower()
        _, deltas, transcript = answer_parts(events)
        assert (
            transcript == f"You said: {heard['transcript'].rstrip('.?!')}. I was sent 3 messages."
        )
        assert deltas == transcript
