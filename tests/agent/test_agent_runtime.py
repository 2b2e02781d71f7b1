"""`run`, one answer as PROTOCOL.md section 2 events, against the real local LLM and the real
speech server; the audio is checked by ear (Whisper). Bidi's pipelining is checked on a
scripted answer of two sentences (an OpenAI-compatible stub on loopback), so that it always
has a second sentence to pipeline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from strands.models import Model
from tests.agent.agent_checks import (
    PROMPT,
    answer_text,
    audio_bytes,
    check_answer,
    check_failure,
    collect,
    of_type,
    settled,
    spoken_text,
)
from tests.agent.llm_stubs import echo, openai_echo_server
from tests.asr import transcribe, word_error_rate
from tests.server.wire import metric

from voicestream.agent.app import free_port
from voicestream.agent.llm import create_model
from voicestream.agent.runtime import EVENT_QUEUE_SIZE, run, speech_transport
from voicestream.protocol import AgentRequest

MAX_WER = 0.25
STORY = "Tell me a very long story about a dragon, in many paragraphs."
RENDERED = "voicestream_rendered_audio_seconds"


def _no_other_tasks() -> set[asyncio.Task[object]]:
    return {task for task in asyncio.all_tasks() if task is not asyncio.current_task()}


@pytest.fixture(scope="module")
def echo_llm() -> Iterator[Model]:
    """An OpenAI-compatible LLM on loopback whose answer is scripted (see `llm_stubs.echo`):
    "You said: ... . I was sent 1 messages.", two sentences whatever the machine."""
    with openai_echo_server() as stub:
        yield create_model("openai", model="echo", base_url=stub.url, api_key="test")


@pytest.mark.parametrize("mode", ["bidi", "batch", "batch-stream"])
async def test_answer_is_spoken_in_every_mode(mode, local_llm, speech_server, whisper):
    rendered_before = await metric(speech_server, RENDERED)
    events, rendered_at_first_audio = await _collect_noting_rendered_audio(
        run(AgentRequest(prompt=PROMPT, mode=mode), local_llm, speech_server), speech_server
    )

    check_answer(events, mode)
    deltas, chunks = of_type(events, "text_delta"), of_type(events, "audio_chunk")
    end, stream_end = events[-1], of_type(events, "audio_stream_end")[0]
    if mode != "bidi":
        assert {chunk["sentence"] for chunk in chunks} == {0}  # one request: the whole answer
        assert end["first_sentence_ms"] >= deltas[-1]["t_ms"]
    if mode == "batch":
        # held back until the request completed: when its first audio reached the caller, the
        # speech server had already rendered all of the answer's audio (its own accounting)
        rendered = rendered_at_first_audio - rendered_before
        assert rendered >= stream_end["duration_s"] - 0.005, (rendered, stream_end["duration_s"])
    # every sentence's word times come before its audio, in every mode (the page's highlight
    # and its rule for what was heard need them)
    timed = [e for e in events if e["type"] in ("word_timestamps", "audio_chunk")]
    for sentence in {chunk["sentence"] for chunk in chunks}:
        own = [e for e in timed if e["sentence"] == sentence]
        assert own[0]["type"] == "word_timestamps" and own[0]["words"], own[:1]
    heard = transcribe(whisper, audio_bytes(events))
    assert word_error_rate(spoken_text(events), heard) <= MAX_WER, (spoken_text(events), heard)
    assert not _no_other_tasks()


async def _collect_noting_rendered_audio(
    answer: AsyncIterator[dict[str, Any]], speech_server: str
) -> tuple[list[dict[str, Any]], float]:
    """Every event of `answer`, and the speech server's rendered audio (seconds, from its
    /metrics) read when the first `audio_chunk` reached the caller."""
    events: list[dict[str, Any]] = []
    rendered = float("nan")
    async with asyncio.timeout(120):
        async for event in answer:
            events.append(event)
            if event["type"] == "audio_chunk" and event["seq"] == 0:
                rendered = await metric(speech_server, RENDERED)
    return events, rendered


async def test_bidi_streams_the_raw_answer_and_gets_its_words_as_written(echo_llm, speech_server):
    """The answer goes to the speech server as the LLM writes it, raw, as one streamed
    utterance (its `sentence` event before the LLM's last text); the server cuts and
    normalizes it, so the word times carry the LLM's own spelling ("$5,", "Dr.") at their
    offsets in the answer's text."""
    prompt = "It costs $5, said Dr. Lee"
    events = await collect(run(AgentRequest(prompt=prompt, mode="bidi"), echo_llm, speech_server))

    check_answer(events, "bidi")
    text = answer_text(events)
    assert text == echo([{"role": "user", "content": prompt}])
    types = [event["type"] for event in events]
    (sentence,) = of_type(events, "sentence")
    last_delta = len(types) - 1 - types[::-1].index("text_delta")
    assert types.index("sentence") < last_delta, types
    assert events[-1]["first_sentence_ms"] <= events[last_delta]["t_ms"]
    assert {chunk["sentence"] for chunk in of_type(events, "audio_chunk")} == {sentence["index"]} == {0}
    words = [w for e in of_type(events, "word_timestamps") for w in e["words"]]
    assert [w["word"] for w in words] == text.split()
    assert [text[w["start_char"] : w["end_char"]] for w in words] == text.split()
    assert not _no_other_tasks()


@pytest.mark.parametrize("mode", ["bidi", "batch"])
async def test_unreachable_speech_server_is_an_error_event(mode, local_llm):
    closed = f"ws://127.0.0.1:{free_port()}/invocations-bidirectional-stream"
    events = await collect(run(AgentRequest(prompt=PROMPT, mode=mode), local_llm, closed), 30)

    check_failure(events, "speech_unavailable")
    assert not _no_other_tasks()
    await settled(local_llm)


async def test_failing_llm_is_an_error_event(speech_server):
    unreachable = create_model(
        "openai",
        model="gpt-test",
        base_url=f"http://127.0.0.1:{free_port()}/v1",
        api_key="test",
        max_retries=0,
    )
    events = await collect(run(AgentRequest(prompt=PROMPT), unreachable, speech_server), 30)

    check_failure(events, "llm_error")
    assert "APIConnectionError" in of_type(events, "error")[0]["message"]
    assert not of_type(events, "audio_chunk")
    assert not _no_other_tasks()


async def test_speech_server_refusal_passes_its_code_through(local_llm, speech_server):
    request = AgentRequest(prompt=PROMPT, voice="no_such_voice")
    events = await collect(run(request, local_llm, speech_server), 60)

    check_failure(events, "unknown_voice")
    assert not _no_other_tasks()
    await settled(local_llm)


async def test_caller_leaving_mid_answer_leaves_nothing_behind(long_winded_llm, speech_server):
    prompt = "Tell me a very long story about a dragon, in many paragraphs."
    answer = run(AgentRequest(prompt=prompt), long_winded_llm, speech_server)
    async with asyncio.timeout(60):
        async for event in answer:
            if event["type"] == "text_delta":
                break
    await answer.aclose()

    assert not _no_other_tasks()
    await settled(long_winded_llm)


def test_speech_targets():
    sagemaker = speech_transport("sagemaker://kokoro-82m?region=eu-west-1")
    assert (sagemaker.endpoint_name, sagemaker.region) == ("kokoro-82m", "eu-west-1")
    websocket = speech_transport("http://127.0.0.1:8080")
    assert websocket.url == "ws://127.0.0.1:8080/invocations-bidirectional-stream"
    with pytest.raises(ValueError, match="endpoint name"):
        speech_transport("sagemaker://")


async def test_malformed_speech_address_is_an_error_event(local_llm):
    events = await collect(run(AgentRequest(prompt=PROMPT), local_llm, "ftp://speech"), 30)

    check_failure(events, "speech_unavailable")
    assert "ftp://speech" in events[-2]["message"]
    await settled(local_llm)



async def test_a_caller_that_stops_reading_holds_the_answer_back(long_winded_llm, speech_server):
    """While the caller takes nothing, the text task waits for room in the answer's bounded
    queue (and so stops reading the LLM) instead of queueing every event; once the caller
    reads again, the answer goes on where it stood."""
    answer = run(AgentRequest(prompt=STORY), long_winded_llm, speech_server)
    try:
        async with asyncio.timeout(120):
            first = [await anext(answer), await anext(answer)]  # agent_start, then the tasks run
            text = next(task for task in asyncio.all_tasks() if task.get_name() == "agent-text")
            while not _waits_for_room(text):
                assert not text.done(), "the answer ended before it filled its queue"
                await asyncio.sleep(0.05)
            events = first + [await anext(answer) for _ in range(EVENT_QUEUE_SIZE + 5)]
    finally:
        await answer.aclose()
    deltas = [event["seq"] for event in events if event["type"] == "text_delta"]
    assert deltas == list(range(len(deltas))) and len(deltas) > 1
    await settled(long_winded_llm)


def _waits_for_room(task: asyncio.Task[object]) -> bool:
    """`task` is parked in `asyncio.Queue.put`, which waits only while its queue is full."""
    awaited: object = task.get_coro()
    while awaited is not None:
        if getattr(awaited, "cr_code", None) is asyncio.Queue.put.__code__:
            return True
        awaited = getattr(awaited, "cr_await", None)
    return False
