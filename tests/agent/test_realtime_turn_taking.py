"""Turn-taking on the Realtime endpoint with `semantic_vad` (the openai SDK's client, the real
agent and speech server, Silero VAD, Smart Turn v3 and Whisper, an echo LLM): a pause that
leaves the question unfinished does not end the turn, a finished question ends at its first
pause (after a short silence where the audio and the words agree), `eagerness` sets how long
an unfinished turn may pause, noise is no turn, and Smart
Turn runs once per pause and never on silence.

Each check reads the agent's own order of events, not the clock: the session hears a client's
events one after the other, and the turn events an append causes (`committed` among them) are
sent before the answer to the next event, so a `session.update` sent after the audio is a
barrier: what was committed before its `session.updated` was decided on the audio sent so far.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import numpy as np
import pytest
from openai import AsyncOpenAI
from tests.agent.llm_stubs import echo
from tests.agent.realtime_checks import (
    b64,
    checked,
    chunks,
    echo_agent,
    hesitant,
    silence,
    spoken,
    trimmed,
)

from voicestream.agent.realtime.end_of_turn import SmartTurn
from voicestream.audio import float_to_pcm16

QUESTION = "How many legs does a spider have?"
"""Paused after its fourth word ("does"), it is unfinished."""
UNFINISHED = "What is the capital of"


@pytest.fixture(scope="module")
def echoing(speech_server: str) -> Iterator[tuple[str, Any]]:
    with echo_agent(speech_server) as (url, llm):
        yield url, llm


@pytest.fixture
def agent(echoing: tuple[str, Any]) -> str:
    return echoing[0]


class Caller:
    """One Realtime session through the openai SDK's client, every event checked."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    async def until(self, last: str) -> list[dict[str, Any]]:
        events = []
        async with asyncio.timeout(120):
            while (event := checked(json.loads(await self.connection.recv_bytes())))["type"] != last:
                events.append(event)
        return [*events, event]

    async def detect(self, detection: dict[str, Any] | None) -> dict[str, Any]:
        """Set the turn detection; what `session.updated` says it is."""
        audio = {"input": {"turn_detection": detection}}
        await self.connection.session.update(session={"type": "realtime", "audio": audio})
        return (await self.until("session.updated"))[-1]["session"]["audio"]["input"]["turn_detection"]

    async def say(self, audio: bytes) -> list[dict[str, Any]]:
        """Append `audio` as a microphone sends it; the events sent while it was heard (up
        to the barrier's `session.updated`)."""
        for piece in chunks(audio):
            await self.connection.input_audio_buffer.append(audio=b64(piece))
        await self.connection.session.update(session={"type": "realtime"})
        return await self.until("session.updated")

    async def answered(self, heard: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`heard`, and the events after it through the answer's `response.done`: a held
        answer that was ready before its turn ended is sent whole at once, and may end
        before the barrier that ends `heard`."""
        if "response.done" in kinds(heard):
            return heard
        return heard + await self.until("response.done")


@contextlib.asynccontextmanager
async def calling(agent: str) -> AsyncIterator[Caller]:
    client = AsyncOpenAI(api_key="unused", websocket_base_url=f"{agent}/v1")
    async with asyncio.timeout(300), client.realtime.connect(model="gpt-realtime") as connection:
        caller = Caller(connection)
        await caller.until("session.created")
        yield caller


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def runs() -> int:
    return SmartTurn.load().runs


async def test_a_pause_inside_a_question_is_one_turn_with_semantic_vad(agent, speech_server):
    """A 700 ms pause after "does": `semantic_vad` hears one turn, judged twice (once per
    pause: Smart Turn's runs), and answers it once; the question ends at its first pause."""
    question = silence(0.5) + hesitant(speech_server, QUESTION, 4, 0.7) + silence(1.2)
    async with calling(agent) as caller:
        assert (await caller.detect({"type": "semantic_vad"}))["type"] == "semantic_vad"
        before = runs()
        heard = await caller.say(question)
        assert kinds(heard).count("input_audio_buffer.speech_started") == 1
        assert kinds(heard).count("input_audio_buffer.committed") == 1, "ended in 1.2 s of silence"
        assert runs() - before == 2
        everything = await caller.answered(heard)
    assert kinds(everything).count("response.created") == 1
    transcript = next(
        e["transcript"]
        for e in everything
        if e["type"] == "conversation.item.input_audio_transcription.completed"
    ).lower()
    assert "legs" in transcript and "spider" in transcript
    assert [e["response"]["status"] for e in everything if e["type"] == "response.done"] == ["completed"]


async def test_server_vad_ends_the_same_question_at_its_pause(agent, speech_server):
    """The same audio with `server_vad` (500 ms of silence): two turns, the first at the
    pause; the second, finished, is not over after 300 ms of silence."""
    question = silence(0.5) + hesitant(speech_server, QUESTION, 4, 0.7) + silence(0.3)
    async with calling(agent) as caller:
        detection = {"type": "server_vad", "create_response": False}
        assert (await caller.detect(detection))["type"] == "server_vad"
        heard = await caller.say(question)
        assert kinds(heard).count("input_audio_buffer.committed") == 1, "the first half"
        heard = await caller.say(silence(0.3))
        assert kinds(heard).count("input_audio_buffer.committed") == 1, "the second half"


async def test_a_whole_question_is_answered_at_its_first_pause_and_sent_once_confirmed(echoing, speech_server):
    """With `semantic_vad` a finished question's answer starts at its first pause, unheard:
    after 200 ms of silence the LLM has been asked and nothing of the turn's end or its
    answer was sent; the audio (Smart Turn) and the words (SmolLM2) both judge it finished,
    so once the silence reaches `eagerness`'s sure 300 ms (at 400 ms here, where a verdict of
    one of them alone waits 1,000 ms) the turn is committed and that same answer (no second
    LLM request) is sent, its events in the API's order. `server_vad` commits nothing on
    300 ms of silence."""
    agent, llm = echoing
    question = trimmed(spoken(speech_server, "What is the capital of France?"))
    async with calling(agent) as caller:
        await caller.detect({"type": "semantic_vad"})
        asked = len(llm.requests)
        heard = kinds(await caller.say(silence(0.5) + question + silence(0.2)))
        assert heard == ["input_audio_buffer.speech_started", "session.updated"], heard
        async with asyncio.timeout(60):
            while len(llm.requests) == asked:
                await asyncio.sleep(0.02)
        assert "capital of france" in echo(llm.requests[-1]["messages"]).lower()
        heard = await caller.say(silence(0.2))
        assert "input_audio_buffer.committed" in kinds(heard), kinds(heard)
        events = await caller.answered(heard)
        firsts = [kinds(events).index(kind) for kind in ORDER]
        assert firsts == sorted(firsts), kinds(events)
        assert [e["response"]["status"] for e in events if e["type"] == "response.done"] == ["completed"]
        assert len(llm.requests) == asked + 1, "the held answer was sent, not asked again"
        await caller.detect({"type": "server_vad", "create_response": False})
        heard = await caller.say(question + silence(0.3))
        assert "input_audio_buffer.committed" not in kinds(heard)


ORDER = (
    "input_audio_buffer.speech_stopped",
    "input_audio_buffer.committed",
    "conversation.item.input_audio_transcription.completed",
    "response.created",
    "response.output_audio.delta",
    "response.done",
)


async def test_a_speaker_who_goes_on_after_a_pause_judged_finished_hears_nothing_of_its_answer(
    echoing, speech_server
):
    """A whole sentence, a pause of 700 ms (judged finished: its answer is prepared), then
    more: the held answer is dropped unheard; the one turn is answered once, its question
    both sentences. `eagerness` low: its confirmations (800 ms sure, 1,500 ms) outlast the
    pause, which `auto`'s sure 300 ms would not."""
    agent, llm = echoing
    first = trimmed(spoken(speech_server, "I have a question about France."))
    second = trimmed(spoken(speech_server, "What is its capital?"))
    async with calling(agent) as caller:
        await caller.detect({"type": "semantic_vad", "eagerness": "low"})
        asked = len(llm.requests)
        heard = await caller.say(silence(0.3) + first + silence(0.7) + second + silence(1.2))
        events = await caller.answered(heard)
    assert kinds(events).count("input_audio_buffer.committed") == 1
    assert kinds(events).count("response.created") == 1
    assert len({e["response_id"] for e in events if "response_id" in e}) == 1
    question = echo(llm.requests[-1]["messages"]).lower()
    assert "france" in question and "capital" in question
    assert len(llm.requests) - asked in (1, 2)  # 2: the pause was judged finished and dropped


@pytest.mark.parametrize(("eagerness", "max_pause_s"), [("high", 2.0), ("auto", 4.0), ("low", 8.0)])
async def test_eagerness_sets_how_long_an_unfinished_turn_may_pause(
    agent, speech_server, eagerness, max_pause_s
):
    """ "What is the capital of", then silence: the turn is judged unfinished at its pause,
    and ends at the eagerness's longest pause (OpenAI's 2, 4 and 8 s), not before."""
    unfinished = trimmed(spoken(speech_server, UNFINISHED))
    async with calling(agent) as caller:
        detection = {"type": "semantic_vad", "eagerness": eagerness, "create_response": False}
        assert (await caller.detect(detection))["eagerness"] == eagerness
        heard = await caller.say(silence(0.3) + unfinished + silence(max_pause_s - 0.3))
        assert "input_audio_buffer.committed" not in kinds(heard)
        heard = await caller.say(silence(0.5))
        assert "input_audio_buffer.committed" in kinds(heard)


def noise() -> bytes:
    """A buzz (a click every 10 ms, which Silero scores as speech), a pulsing chord, hiss."""
    rate = 24000
    buzz = np.zeros(rate, np.float32)
    for start in range(0, rate, rate // 100):
        buzz[start : start + 24] = 0.8 * np.hanning(24)
    t = np.arange(2 * rate) / rate
    pulse = 0.5 + 0.5 * np.sin(4 * np.pi * t)
    chord = 0.2 * sum(np.sin(2 * np.pi * f * t) for f in (440, 554, 659)) * pulse
    hiss = 0.1 * np.random.default_rng(7).standard_normal(2 * rate)
    samples = np.concatenate([buzz, np.zeros(rate // 2), chord, hiss]).astype(np.float32)
    return float_to_pcm16(samples).tobytes()


async def test_noise_and_silence_are_no_turn_and_cost_no_model_runs(agent, speech_server):
    """A buzz, a chord and hiss commit and answer nothing (what Silero took for speech ends
    as no words); a minute of silence runs Smart Turn not once; a question after them is
    heard."""
    question = trimmed(spoken(speech_server, "What is the capital of France?"))
    async with calling(agent) as caller:
        await caller.detect({"type": "semantic_vad"})
        before = runs()
        heard = await caller.say(noise())
        assert not {"input_audio_buffer.committed", "response.created"} & set(kinds(heard))
        started = kinds(heard).count("input_audio_buffer.speech_started")
        assert kinds(heard).count("input_audio_buffer.speech_stopped") == started
        assert runs() - before == started, "one verdict per pause"
        before = runs()
        assert kinds(await caller.say(silence(60.0))) == ["session.updated"]
        assert runs() == before
        heard = await caller.say(question + silence(1.2))
        assert kinds(heard).count("input_audio_buffer.committed") == 1
        await caller.answered(heard)


async def test_without_smart_turn_semantic_vad_is_served_by_server_vad(speech_server, caplog):
    """No Smart Turn file (here: a path with nothing there): `semantic_vad` is served by the
    server VAD, which `session.updated` says, with a warning in the log."""
    with (
        caplog.at_level(logging.WARNING),
        echo_agent(speech_server, turn_model="/nonexistent/smart-turn.onnx") as (url, _),
    ):
        client = AsyncOpenAI(api_key="unused", websocket_base_url=f"{url}/v1")
        async with asyncio.timeout(60), client.realtime.connect(model="gpt-realtime") as connection:
            caller = Caller(connection)
            await caller.until("session.created")
            detection = await caller.detect({"type": "semantic_vad", "interrupt_response": False})
    assert (detection["type"], detection["interrupt_response"]) == ("server_vad", False)
    assert any("semantic_vad is served by server_vad" in r.getMessage() for r in caplog.records)


async def test_server_vad_answers_the_whole_question_when_its_speaker_went_on(agent, speech_server):
    """`server_vad` ends the first half at the pause; the speaker goes on before (or after)
    the first half is transcribed. The first half's answer, if one started, is cancelled when
    the speaker goes on, and the second half is answered: the last response comes after the
    second commit and completes."""
    question = silence(0.5) + hesitant(speech_server, QUESTION, 4, 0.7) + silence(1.0)
    async with calling(agent) as caller:
        assert (await caller.detect({"type": "server_vad"}))["type"] == "server_vad"
        heard = await caller.say(question)
        assert kinds(heard).count("input_audio_buffer.committed") == 2
        events = list(heard)
        while not any(e["type"] == "response.done" and e["response"]["status"] == "completed" for e in events):
            events += await caller.until("response.done")
    second_commit = max(i for i, e in enumerate(events) if e["type"] == "input_audio_buffer.committed")
    created = [i for i, e in enumerate(events) if e["type"] == "response.created"]
    assert created[-1] > second_commit, kinds(events)
    done = [e["response"]["status"] for e in events if e["type"] == "response.done"]
    assert done[:-1] == ["cancelled"] * (len(done) - 1) and done[-1] == "completed", done
