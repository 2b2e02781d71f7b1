"""Checks shared by the agent tests: the event sequence of PROTOCOL.md section 2, the audio it
carries, and what Whisper hears in it."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Any

from voicestream.protocol import parse_agent_event
from voicestream.text import normalize_for_speech

SAMPLE_RATE = 24000
PROMPT = "Why is the sky blue?"


async def collect(
    events: AsyncIterator[dict[str, Any]], timeout_s: float = 120.0
) -> list[dict[str, Any]]:
    """Every event of one answer, failing the test instead of hanging."""
    async with asyncio.timeout(timeout_s):
        return [event async for event in events]


async def settled(llm: Any, timeout_s: float = 15.0) -> None:
    """The local model's generation thread has let go of the model (at its next token, or
    once the prompt is read: llama.cpp cannot be stopped inside the prompt's evaluation)."""
    async with asyncio.timeout(timeout_s):
        while llm._generate_lock.locked():
            await asyncio.sleep(0.02)


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == kind]


def answer_text(events: list[dict[str, Any]]) -> str:
    return "".join(event["text"] for event in of_type(events, "text_delta"))


def audio_bytes(events: list[dict[str, Any]]) -> bytes:
    return b"".join(base64.b64decode(event["data"]) for event in of_type(events, "audio_chunk"))


def check_answer(events: list[dict[str, Any]], mode: str) -> None:
    """A successful answer in `mode` follows PROTOCOL.md section 2."""
    assert [event["type"] for event in events].count("error") == 0, of_type(events, "error")
    first, last = events[0], events[-1]
    assert first["type"] == "agent_start" and first["mode"] == mode
    assert last["type"] == "agent_end"
    request_ids = {event["request_id"] for event in events}
    assert len(request_ids) == 1 and request_ids.pop()
    times = [event["t_ms"] for event in events]
    assert times == sorted(times) and times[0] >= 0, "t_ms must follow the order of events"
    for event in events:
        parse_agent_event(event)  # each event has the fields of its type

    deltas = of_type(events, "text_delta")
    chunks = of_type(events, "audio_chunk")
    assert deltas and chunks
    assert [d["seq"] for d in deltas] == list(range(len(deltas)))
    assert [c["seq"] for c in chunks] == list(range(len(chunks)))
    sentences = [c["sentence"] for c in chunks]
    assert sentences == sorted(sentences) and sentences[0] == 0

    types = [event["type"] for event in events]
    assert types.count("audio_stream_start") == 1 and types.count("audio_stream_end") == 1
    start = types.index("audio_stream_start")
    assert start < types.index("audio_chunk")
    assert types.index("audio_stream_end") > max(
        i for i, t in enumerate(types) if t == "audio_chunk"
    )
    stream_start = events[start]
    assert (stream_start["format"], stream_start["sample_rate"]) == ("pcm16", SAMPLE_RATE)
    stream_end = of_type(events, "audio_stream_end")[0]
    assert stream_end["total_chunks"] == len(chunks)

    assert last["ttft_ms"] == deltas[0]["t_ms"]
    assert last["ttfa_ms"] == chunks[0]["t_ms"]
    assert last["first_sentence_ms"] <= last["ttfa_ms"]
    assert last["first_sentence_synthesis_s"] > 0

    audio = audio_bytes(events)
    assert len(audio) % 2 == 0
    assert abs(len(audio) / 2 / SAMPLE_RATE - stream_end["duration_s"]) < 0.05


def check_failure(events: list[dict[str, Any]], code: str) -> None:
    """A failed answer: `agent_start`, then one `error` with `code`, and `agent_end` last."""
    types = [event["type"] for event in events]
    assert types[0] == "agent_start" and types[-1] == "agent_end"
    errors = of_type(events, "error")
    assert len(errors) == 1 and types[-2] == "error", types
    assert errors[0]["code"] == code, errors[0]
    assert errors[0]["message"] and "Traceback" not in errors[0]["message"]
    for event in events:
        parse_agent_event(event)


def spoken_text(events: list[dict[str, Any]]) -> str:
    """What the agent asked the speech server to say: its answer, normalized for speech."""
    return normalize_for_speech(answer_text(events))
