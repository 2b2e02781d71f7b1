"""The AgentCore app over real HTTP: uvicorn on loopback, httpx as the caller."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
import pytest
from tests.agent.agent_checks import PROMPT, check_answer, settled

from voicestream.agent.app import AgentSettings
from voicestream.client import AsyncAgentClient
from voicestream.protocol import AudioChunk
from voicestream.text import ChunkSchedule


async def post_events(url: str, payload: Any, timeout_s: float = 120.0) -> list[dict[str, Any]]:
    """The answer's events through the agent client, as the JSON dicts the agent sent."""
    async with asyncio.timeout(timeout_s), AsyncAgentClient(url, timeout_s=timeout_s) as client:
        return [
            received.event.model_dump(mode="json", exclude_none=True)
            async for received in client.post(payload)
        ]


async def speech_server_idle(speech_server: str, timeout_s: float = 15.0) -> None:
    """No session open and nothing queued on the speech server."""
    wanted = {"voicestream_active_sessions 0.0", "voicestream_queue_depth 0.0"}
    async with asyncio.timeout(timeout_s), httpx.AsyncClient() as client:
        while not wanted <= set((await client.get(f"{speech_server}/metrics")).text.splitlines()):
            await asyncio.sleep(0.05)


async def test_ping_is_healthy(agent_url):
    async with httpx.AsyncClient() as client:
        response = await client.get(f"{agent_url}/ping")
    assert response.status_code == 200
    assert response.json()["status"] == "Healthy"


async def test_answer_streams_as_server_sent_events(agent_url):
    events = await post_events(agent_url, {"prompt": PROMPT, "mode": "bidi", "voice": "af_heart"})

    check_answer(events, "bidi")


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({"mode": "bidi"}, "text_required"),
        ({"prompt": "Hello.", "mode": "fast"}, "invalid_message"),
        ({"prompt": "Hello.", "speed": 9}, "invalid_speed"),
        ({"prompt": "Hello.", "lang": "tlh"}, "unsupported_language"),
        ([1, 2], "invalid_message"),
    ],
)
async def test_bad_payload_is_an_error_event(agent_url, payload, code):
    events = await post_events(agent_url, payload, 10)

    assert [event["type"] for event in events] == ["error", "agent_end"]
    assert events[0]["code"] == code and events[0]["message"]
    assert events[0]["request_id"] == events[1]["request_id"]


async def test_hanging_up_mid_answer_stops_the_answer(
    agent_url, agent_app, speech_server, long_winded_llm
):
    prompt = "Tell me a very long story about a dragon, in many paragraphs."
    async with asyncio.timeout(120), AsyncAgentClient(agent_url, timeout_s=120) as client:
        events = client.events(prompt)
        async with contextlib.aclosing(events):
            async for received in events:
                if isinstance(received.event, AudioChunk):
                    break  # hang up with the LLM still writing and sentences still queued

    service = agent_app.state.service
    await settled(long_winded_llm)
    await speech_server_idle(speech_server)
    async with asyncio.timeout(5):
        while service.active_answers:
            await asyncio.sleep(0.02)


def test_settings_from_environment():
    env = {
        "VOICESTREAM_SPEECH_URL": "ws://speech:8080/invocations-bidirectional-stream",
        "VOICESTREAM_LLM": "bedrock",
        "VOICESTREAM_LLM_MODEL": "us.amazon.nova-lite-v1:0",
        "AWS_REGION": "us-west-2",
        "VOICESTREAM_LLM_MAX_TOKENS": "120",
        "VOICESTREAM_LLM_THREADS": "1",
        "VOICESTREAM_FIRST_CLAUSE_WORDS": "0",
        "VOICESTREAM_CHUNK_SCHEDULE": "1,3",
    }
    settings = AgentSettings.from_env(env, llm="openai", base_url=None)

    assert settings.speech_url == "ws://speech:8080/invocations-bidirectional-stream"
    assert (settings.llm, settings.model, settings.region) == (
        "openai",
        "us.amazon.nova-lite-v1:0",
        "us-west-2",
    )
    assert settings.base_url is None
    assert (settings.max_tokens, settings.llm_threads) == (120, 1)
    assert settings.first_clause_words is None  # 0: whole sentences only
    assert settings.schedule == ChunkSchedule(None, (1, 3))
    assert AgentSettings.from_env({}) == AgentSettings()
    assert AgentSettings.from_env({}, first_clause_words=0).schedule.first_words is None
    with pytest.raises(ValueError, match="chunk schedule"):
        AgentSettings.from_env({"VOICESTREAM_CHUNK_SCHEDULE": "one"})
