"""The agent holds a conversation: the real agent app, speech server and client, with each
LLM provider (the real local model; an OpenAI-compatible server and a fake of Bedrock's
ConverseStream on loopback, both echoing what they were sent), and an interrupted answer
remembered up to the last word the listener heard."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from tests.agent.llm_stubs import LLMStub, echo, fake_bedrock_runtime, openai_echo_server

from voicestream.agent.app import AgentSettings, create_app, running_agent
from voicestream.agent.conversation import chat
from voicestream.agent.llm import SYSTEM_PROMPT, create_model, stream_text
from voicestream.client import AgentAnswer, AsyncAgentClient
from voicestream.protocol import (
    SESSION_HEADER,
    AgentStart,
    AudioChunk,
    Interruption,
    SentenceWords,
    new_session_id,
)

FACT, QUESTION = "My name is Ada.", "What is my name?"


@pytest.fixture(scope="module")
def openai_stub() -> Iterator[LLMStub]:
    with openai_echo_server() as stub:
        yield stub


@pytest.fixture(scope="module")
def bedrock_fake() -> Iterator[LLMStub]:
    with fake_bedrock_runtime() as stub:
        yield stub


def agent_for(speech_server: str, provider: str, stub: LLMStub, app_seen: list | None = None):
    """The agent app with `provider` answering from `stub`, served on loopback."""
    if provider == "openai":
        model = create_model("openai", model="echo", base_url=stub.url, api_key="test")
    else:
        model = create_model("bedrock", model="amazon.nova-lite-v1:0", base_url=stub.url, region="us-east-1")
    app = create_app(AgentSettings(speech_url=speech_server), llm=model)
    if app_seen is not None:
        app_seen.append(app)
    return running_agent(app)


def user_and_assistant(messages: list[dict]) -> list[tuple[str, str]]:
    """(role, text) of the chat messages a provider received, system prompt aside."""
    pairs = []
    for message in messages:
        content = message["content"]
        text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
        if message["role"] != "system":
            pairs.append((message["role"], text))
    return pairs


@pytest.fixture
def aws_credentials(monkeypatch):
    """Credentials for boto3 to sign with; the fake never checks them."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "fake-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.mark.parametrize("provider", ["openai", "bedrock"])
async def test_a_remote_provider_gets_the_earlier_turns_as_chat_messages(
    speech_server, openai_stub, bedrock_fake, aws_credentials, provider
):
    stub = openai_stub if provider == "openai" else bedrock_fake
    with agent_for(speech_server, provider, stub) as url:
        async with asyncio.timeout(120), AsyncAgentClient(url, session_id=new_session_id()) as client:
            first = await client.ask(FACT)
            seen = len(stub.requests)
            second = await client.ask(QUESTION)
            client.session_id = None
            alone = await client.ask(QUESTION)

    assert first.error is None and second.error is None, (first.error, second.error)
    assert first.text.strip() == echo([{"content": FACT}])
    turns = user_and_assistant(stub.requests[seen]["messages"])
    assert turns == [("user", FACT), ("assistant", first.text.strip()), ("user", QUESTION)]
    assert "I was sent 3 messages" in second.text
    assert user_and_assistant(stub.requests[-1]["messages"]) == [("user", QUESTION)]
    assert alone.text.strip() == echo([{"content": QUESTION}])
    if provider == "bedrock":  # the Converse shapes, as documented
        assert stub.requests[seen]["system"] == [{"text": SYSTEM_PROMPT}]
        assert stub.requests[seen]["messages"][1] == {
            "role": "assistant", "content": [{"text": first.text.strip()}]
        }


async def test_the_local_model_remembers_a_name(agent_url, agent_app, local_llm, monkeypatch):
    """The second question reaches the local model with the first turn before it (what the
    model makes of it is a 135M model's business: its answer is not asserted on)."""
    seen: list[list[str]] = []
    real_stream = local_llm.stream

    def recording_stream(messages, *args, **kwargs):
        seen.append([block.get("text", "") for message in messages for block in message["content"]])
        return real_stream(messages, *args, **kwargs)

    monkeypatch.setattr(local_llm, "stream", recording_stream)
    session = new_session_id()
    async with asyncio.timeout(240), AsyncAgentClient(agent_url, session_id=session) as client:
        first = await client.ask("Hello! My name is Ada. Please remember my name.")
        second = await client.ask("What is my name?")

    assert first.error is None and second.error is None, (first.error, second.error)
    assert seen[-1][0] == "Hello! My name is Ada. Please remember my name."
    assert seen[-1][1] == first.text.strip() and seen[-1][-1] == "What is my name?"
    history = agent_app.state.service.conversations.history(session)
    assert [m["content"][0]["text"] for m in history][2:] == ["What is my name?", second.text.strip()]


@pytest.fixture
def small_context_llm(local_llm):
    """The local model with a context of 512 tokens (quick to fill, and to evaluate)."""
    local_llm.update_config(n_ctx=512)
    yield local_llm
    local_llm.update_config(n_ctx=2048)


async def test_the_local_model_answers_a_history_longer_than_its_context(small_context_llm):
    """The oldest turns go, the question stays (llama.cpp refuses a prompt beyond its context)."""
    turns = [(f"Fact {n}: " + "the sea is wide and deep. " * 10, "I see.") for n in range(10)]
    messages = chat(turns, "My name is Ada. What is my name?")

    async with asyncio.timeout(120):
        text = "".join([delta async for delta in stream_text(small_context_llm, messages)])

    assert text.strip()  # beyond its context, llama.cpp would have raised instead


async def test_a_session_id_beyond_agentcore_bounds_is_refused(agent_url):
    async with asyncio.timeout(30), AsyncAgentClient(agent_url, session_id="x" * 257) as client:
        answer = await client.ask("Hello.")

    assert answer.error is not None and answer.error.code == "invalid_message"
    assert SESSION_HEADER in answer.error.message


async def spoken(client: AsyncAgentClient, prompt: str) -> tuple[AgentAnswer, str, list[dict[str, Any]], float]:
    """The answer, its request id, its timed words (offsets in its text) and its audio's length."""
    answer, request_id = AgentAnswer("bidi"), ""
    words: list[dict[str, Any]] = []
    seconds = 0.0
    async for received in client.events(prompt):
        answer.add(received)
        event = received.event
        if isinstance(event, AgentStart):
            request_id = event.request_id
        elif isinstance(event, SentenceWords):
            words += [word.model_dump() for word in event.words]
        elif isinstance(event, AudioChunk):
            seconds += len(event.audio()) / 48000
    return answer, request_id, words, seconds


async def test_an_interrupted_answer_is_remembered_up_to_the_last_word_heard(speech_server, openai_stub):
    """The listener stops part way: the turn keeps the answer as written ("$5," stays "$5,")
    up to the last word whose audio had ended, where the speech server placed it. The stub
    answers in two sentences (its echo, then how many messages it was sent); the listener
    stops in the second, so the words of both sentences are placed in the one text."""
    with agent_for(speech_server, "openai", openai_stub) as url:
        async with asyncio.timeout(180), AsyncAgentClient(url, session_id=new_session_id()) as client:
            first, request_id, words, seconds = await spoken(client, "It costs $5, tell me a story.")
            assert first.error is None, first.error
            assert len(words) > 10 and seconds > 0
            heard_s = words[-3]["end_s"] + 0.01  # "sent", in "I was sent 1 messages."
            await client.ask("Go on.", interrupted=Interruption(request_id=request_id, heard_ms=heard_s * 1000))

    remembered = user_and_assistant(openai_stub.requests[-1]["messages"])[1][1]
    last_heard = [w for w in words if w["end_s"] <= heard_s][-1]
    assert remembered == first.text[: last_heard["end_char"]].strip()
    assert "$5," in remembered and "I was sent" in remembered and len(remembered) < len(first.text.strip())


async def test_compare_asks_every_mode_as_a_first_question(speech_server, openai_stub):
    from voicestream.bench.compare import compare

    seen, apps = len(openai_stub.requests), []
    with agent_for(speech_server, "openai", openai_stub, apps) as url:
        results = await asyncio.wait_for(compare(url, FACT, ["bidi", "batch"], warmup=False), 180)

    assert [r.error for r in results] == [None, None]
    assert len(apps[0].state.service.conversations) == 2  # one conversation per answer
    assert len(openai_stub.requests) - seen == 2
    assert all(user_and_assistant(r["messages"]) == [("user", FACT)] for r in openai_stub.requests[seen:])

