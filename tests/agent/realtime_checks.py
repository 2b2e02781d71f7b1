"""Shared by the Realtime tests: an agent with an echo LLM in front of the real speech server,
speech made by the real engine, and every server event checked against the openai SDK's own
models."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator
from typing import Any, get_args

import httpx
import numpy as np
from openai.types.realtime import RealtimeServerEvent
from tests.agent.llm_stubs import AnswerHold, LLMStub, openai_echo_server

from voicestream.agent.app import AgentSettings, create_app, running_agent
from voicestream.agent.llm import create_model

SDK_MODELS = {
    get_args(model.model_fields["type"].annotation)[0]: model
    for model in get_args(get_args(RealtimeServerEvent)[0])
}
"""Each server event type to the SDK's model of it."""


def checked(event: dict[str, Any]) -> dict[str, Any]:
    """`event`, once the SDK's model for its type has validated it (a shape the SDK does not
    declare fails the test)."""
    SDK_MODELS[event["type"]].model_validate(event)
    return event


@contextlib.contextmanager
def echo_agent(
    speech_server: str,
    services: list[Any] | None = None,
    hold: AnswerHold | None = None,
    **settings: Any,
) -> Iterator[tuple[str, LLMStub]]:
    """The agent answering from an echo LLM (holding each answer after its first sentence,
    with a `hold`); yields its ws:// base URL and the stub (and appends its `AgentService` to
    `services`, for a test that reads its conversations)."""
    with openai_echo_server(hold) as stub:
        llm = create_model("openai", model="echo", base_url=stub.url, api_key="test")
        app = create_app(AgentSettings(speech_url=speech_server, **settings), llm=llm)
        if services is not None:
            services.append(app.state.service)
        with running_agent(app) as url:
            yield url.replace("http://", "ws://"), stub


def spoken(speech_server: str, text: str) -> bytes:
    """`text` spoken by the real engine: pcm16 at 24 kHz (the speech server's OpenAI route)."""
    answer = httpx.post(
        f"{speech_server}/v1/audio/speech",
        json={"input": text, "voice": "af_heart", "response_format": "pcm"},
        timeout=120,
    )
    answer.raise_for_status()
    return answer.content


def hesitant(speech_server: str, text: str, after: int, pause_s: float) -> bytes:
    """`text` spoken by the real engine with a pause of `pause_s` after its `after`-th word, as
    a speaker who stops to find the next word: one render cut between two words (so the
    voice does not fall as at the end of a sentence), silence in the cut."""
    answer = httpx.post(
        f"{speech_server}/dev/captioned_speech",
        json={"input": text, "voice": "af_heart", "response_format": "pcm", "stream": False},
        timeout=120,
    )
    answer.raise_for_status()
    body = answer.json()
    pcm = base64.b64decode(body["audio"])
    words = body["timestamps"]
    cut_s = (words[after - 1]["end_time"] + words[after]["start_time"]) / 2
    cut = round(cut_s * 24000) * 2
    return trimmed(pcm[:cut] + silence(pause_s) + pcm[cut:])


def trimmed(pcm: bytes) -> bytes:
    """`pcm` (16-bit) from its first to its last sample of speech (1 % of its peak and more),
    without the engine's silence around it: a test then knows how much silence follows."""
    samples = np.frombuffer(pcm, np.int16)
    loud = np.flatnonzero(np.abs(samples) >= 0.01 * np.abs(samples).max())
    return samples[loud[0] : loud[-1] + 1].tobytes()


def silence(seconds: float) -> bytes:
    return bytes(int(24000 * seconds) * 2)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def chunks(data: bytes, size: int = 9600) -> Iterator[bytes]:
    """`data` as a microphone sends it: 200 ms at a time."""
    for start in range(0, len(data), size):
        yield data[start : start + size]
