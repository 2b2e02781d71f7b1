"""The agent stays finite: a cap on answers at once, a longest prompt, a deadline per answer
(transcription included), a cap on request bodies and on a recording's length, keep-alive
comments on quiet streams, and a speech server that stalls or goes away."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from tests.agent.agent_checks import collect, settled
from tests.agent.test_agent_app import post_events
from tests.agent.test_agent_voice_input import recording
from tests.audio.test_audio_decode import ogg_flac_silence

from voicestream.agent.app import AgentSettings, EventStream, create_app, running_agent
from voicestream.agent.runtime import AnswerLimits
from voicestream.agent.service import AgentService
from voicestream.asgi import ABORT
from voicestream.engine import KokoroEngine, Piece
from voicestream.protocol import SSEDecoder
from voicestream.server import ServerSettings, free_port, running_server

STORY = "Tell me a very long story about a dragon, in many paragraphs."


@pytest.fixture
def limited_agent(speech_server: str, long_winded_llm) -> Iterator[str]:
    limits = AnswerLimits(max_answers=1, max_prompt_chars=50, answer_timeout_s=3.0, keepalive_s=0.05)
    app = create_app(AgentSettings(speech_url=speech_server, limits=limits), llm=long_winded_llm)
    with running_agent(app) as url:
        yield url


async def test_an_answer_beyond_the_cap_is_busy_without_waiting_for_a_slot(
    engine: KokoroEngine, long_winded_llm
) -> None:
    """The one slot is held by an answer that cannot end by itself (its speech server hangs
    at the first piece; its deadline and speech timeout are far off): a second answer is
    refused with `busy` while the first still holds the slot, so it did not wait for it;
    the first caller hanging up frees the slot."""
    limits = AnswerLimits(max_answers=1, answer_timeout_s=300.0, speech_timeout_s=300.0)
    with hung_speech_server(engine) as speech_url:
        app = create_app(AgentSettings(speech_url=speech_url, limits=limits), llm=long_winded_llm)
        service = app.state.service
        with running_agent(app) as url:
            first = asyncio.create_task(post_events(url, {"prompt": STORY}, 300))
            await until(lambda: service.active_answers == 1, "the first answer to be admitted")
            refused = await post_events(url, {"prompt": "Me too."}, 60)
            holding = (service.active_answers, first.done())
            first.cancel()
            await asyncio.gather(first, return_exceptions=True)
            await until(lambda: service.active_answers == 0, "the hung-up answer to free its slot")
    assert [e["type"] for e in refused] == ["error", "agent_end"] and refused[0]["code"] == "busy"
    assert holding == (1, False), "the refusal came once the first answer had let go of its slot"
    await settled(long_winded_llm)


async def test_an_answer_ends_at_its_deadline(engine: KokoroEngine, long_winded_llm) -> None:
    """The speech server hangs at the first piece and its timeout is far off, so only the
    answer's 3 s deadline can end the answer, however short the model's answer is."""
    limits = AnswerLimits(answer_timeout_s=3.0, speech_timeout_s=300.0)
    with hung_speech_server(engine) as speech_url:
        app = create_app(AgentSettings(speech_url=speech_url, limits=limits), llm=long_winded_llm)
        with running_agent(app) as url:
            events = await post_events(url, {"prompt": "A long dragon story, please."}, 120)
    assert [e["type"] for e in events][-2:] == ["error", "agent_end"]
    assert events[-2]["code"] == "answer_timeout" and "longer than 3 s" in events[-2]["message"]
    assert events[0]["type"] == "agent_start"
    await settled(long_winded_llm)


@contextlib.contextmanager
def hung_speech_server(engine: KokoroEngine) -> Iterator[str]:
    """A speech server whose engine hangs at its first piece until the test is over."""
    stalling = StallingEngine(engine, pieces=0)
    speech = ServerSettings(host="127.0.0.1", port=free_port())
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(running_server(stalling, speech))  # type: ignore[arg-type]
        stack.callback(stalling.release.set)  # before the server stops: it joins its workers
        yield url


async def until(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    """Wait for `condition`, failing the test after `timeout_s`."""
    try:
        async with asyncio.timeout(timeout_s):
            while not condition():
                await asyncio.sleep(0.02)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}")


async def test_a_prompt_over_the_limit_is_refused(limited_agent: str) -> None:
    events = await post_events(limited_agent, {"prompt": "x" * 51}, 10)
    assert [e["type"] for e in events] == ["error", "agent_end"]
    assert events[0]["code"] == "text_too_long"


async def test_quiet_streams_carry_keep_alive_comments(limited_agent: str) -> None:
    """The local model takes well over 50 ms to its first token: comments fill the wait."""
    raw = bytearray()
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("POST", f"{limited_agent}/invocations", json={"prompt": "Hi."}) as response,
    ):
        async for chunk in response.aiter_raw():
            raw += chunk
    assert b": keep-alive\n\n" in raw
    events = [event.json() for event in SSEDecoder().feed(bytes(raw))]
    assert events[0]["type"] == "agent_start" and events[-1]["type"] == "agent_end"


class StallingEngine:
    """The real engine, whose runs hang (like a wedged server) after the first few pieces."""

    def __init__(self, engine: KokoroEngine, pieces: int) -> None:
        self._engine = engine
        self._left = pieces
        self.release = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def render_parts(self, piece: Piece, voice: str, speed: float, *args: Any) -> Any:
        self._left -= 1
        if self._left < 0:
            self.release.wait(60)
        return self._engine.render_parts(piece, voice, speed, *args)


async def test_a_stalled_speech_server_ends_the_answer(engine, long_winded_llm) -> None:
    stalling = StallingEngine(engine, pieces=1)  # any answer of two pieces or more stalls
    speech = ServerSettings(host="127.0.0.1", port=free_port())
    limits = AnswerLimits(speech_timeout_s=2.0)
    with running_server(stalling, speech) as speech_url:  # type: ignore[arg-type]
        app = create_app(AgentSettings(speech_url=speech_url, limits=limits), llm=long_winded_llm)
        try:
            with running_agent(app) as url:
                events = await post_events(url, {"prompt": STORY}, 60)
        finally:
            stalling.release.set()
    assert [e["type"] for e in events][-2:] == ["error", "agent_end"], [
        (e["type"], e.get("text", e.get("index", ""))) for e in events if e["type"] != "audio_chunk"
    ]
    assert events[-2]["code"] == "speech_unavailable" and "nothing for 2 s" in events[-2]["message"]


async def test_speech_server_going_away_mid_answer(engine, long_winded_llm) -> None:
    """The speech server stops (its sessions closed) after the first audio of an answer."""
    speech = ServerSettings(host="127.0.0.1", port=free_port())
    events: list[dict[str, Any]] = []
    decoder = SSEDecoder()
    with contextlib.ExitStack() as speech_server:
        speech_url = speech_server.enter_context(running_server(engine, speech))
        app = create_app(AgentSettings(speech_url=speech_url), llm=long_winded_llm)
        with running_agent(app) as url:
            async with (
                asyncio.timeout(90),
                httpx.AsyncClient(timeout=90) as client,
                client.stream("POST", f"{url}/invocations", json={"prompt": STORY}) as response,
            ):
                async for chunk in response.aiter_raw():
                    for event in decoder.feed(chunk):
                        events.append(event.json())
                        if events[-1]["type"] == "audio_chunk":
                            await asyncio.to_thread(speech_server.close)
    assert [e["type"] for e in events][-2:] == ["error", "agent_end"], [
        (e["type"], e.get("text", e.get("index", ""))) for e in events if e["type"] != "audio_chunk"
    ]
    assert events[-2]["code"] == "speech_unavailable"


async def test_the_agent_needs_its_api_key_except_on_ping(speech_server: str, local_llm) -> None:
    app = create_app(AgentSettings(speech_url=speech_server, api_key="agent-key"), llm=local_llm)
    with running_agent(app) as url:
        async with httpx.AsyncClient(timeout=30) as client:
            assert (await client.get(f"{url}/ping")).status_code == 200
            refused = await client.post(f"{url}/invocations", json={"mode": "bidi"})
            assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
            allowed = await client.post(
                f"{url}/invocations", json={"mode": "bidi"}, headers={"Authorization": "Bearer agent-key"}
            )
    assert allowed.status_code == 200 and '"code":"text_required"' in allowed.text.replace(" ", "")


async def test_ping_answers_503_while_the_agent_drains(speech_server: str, local_llm) -> None:
    app = create_app(AgentSettings(speech_url=speech_server), llm=local_llm)
    with running_agent(app) as url:
        async with httpx.AsyncClient(timeout=30) as client:
            assert (await client.get(f"{url}/ping")).status_code == 200
            await app.state.service.drain(grace_s=0.1)
            draining = await client.get(f"{url}/ping")
            refused = await post_events(url, {"prompt": "Hi."}, 10)
    assert draining.status_code == 503 and draining.json() == {"status": "draining"}
    assert refused[0]["code"] == "busy"


async def test_a_body_over_the_cap_is_refused_before_it_is_read(speech_server: str, local_llm) -> None:
    limits = AnswerLimits(max_body_bytes=64 * 1024)
    app = create_app(AgentSettings(speech_url=speech_server, limits=limits), llm=local_llm)

    async def endless() -> AsyncIterator[bytes]:
        for _ in range(10_000):
            yield b" " * 65536  # 640 MB if the framework read it all

    with running_agent(app) as url:
        async with httpx.AsyncClient(timeout=30) as client:
            json_body = {"content-type": "application/json"}
            declared = await client.post(f"{url}/invocations", content=b"x" * 5_000_000, headers=json_body)
            streamed = await client.post(f"{url}/invocations", content=endless(), headers=json_body)
            within = await client.post(f"{url}/invocations", json={"mode": "bidi"})
    for refused in (declared, streamed):
        assert refused.status_code == 413
        assert refused.json()["error"]["code"] == "payload_too_large"
    assert within.status_code == 200 and '"code":"text_required"' in within.text.replace(" ", "")


async def test_a_long_silent_recording_is_refused_without_decoding_it_whole(agent_url: str) -> None:
    """Ten minutes of Ogg FLAC silence is 130 kB: far under the byte limit, far over 120 s."""
    data, _ = ogg_flac_silence(600)
    payload = {"audio": base64.b64encode(data).decode("ascii"), "audio_format": "ogg"}

    events = await post_events(agent_url, payload, 30)

    assert [event["type"] for event in events] == ["error", "agent_end"]
    assert events[0]["code"] == "audio_too_large" and "120 seconds" in events[0]["message"]


async def test_transcription_counts_inside_the_answer_deadline(local_llm) -> None:
    """The recognizer is busy (its lock held, as by another question) past the deadline:
    the answer ends with `answer_timeout` instead of waiting for its turn."""
    limits = AnswerLimits(answer_timeout_s=1.0)
    service = AgentService(AgentSettings(limits=limits), local_llm)
    tone = (0.1 * np.sin(np.arange(16_000) / 8)).astype(np.float32)
    payload = {"audio": recording(tone, "wav", 16_000), "audio_format": "wav"}

    with service.recognizer._lock:
        events = await collect(service.answer(payload), 30)

    assert [event["type"] for event in events] == ["error", "agent_end"]
    assert events[0]["code"] == "answer_timeout"
    assert service.active_answers == 0


async def test_a_caller_that_takes_nothing_is_dropped_and_frees_its_answer(speech_server, local_llm) -> None:
    """Driven as uvicorn drives the response, with a send that never completes: a caller
    that stays connected and reads nothing (a socket's buffers would make this depend on
    their sizes). The stream gives up after the deadline, asks the server to drop the
    connection (the `ABORT` extension the agent's uvicorn protocol offers; the speech
    server's test_limits drops a real one), and the answer's slot is free."""
    limits = AnswerLimits(answer_timeout_s=1.0, keepalive_s=0.05)
    service = AgentService(AgentSettings(speech_url=speech_server, limits=limits), local_llm)
    stream = EventStream(service.answer({"prompt": "Hi."}), limits.keepalive_s, limits.answer_timeout_s)
    never = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await never.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            await never.wait()

    dropped = threading.Event()
    scope = {"type": "http", "asgi": {"spec_version": "2.3"}, "method": "POST", "headers": [],
             "extensions": {ABORT: {"abort": dropped.set}}}
    async with asyncio.timeout(30):
        await stream(scope, receive, send)
    assert dropped.is_set()
    assert service.active_answers == 0
    await settled(local_llm)
