"""The LLM providers and `stream_text`: the real local model, Strands' OpenAI provider
against an OpenAI-compatible server on loopback, and the errors of `create_model`."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator

import pytest
import uvicorn
from llama_cpp import Llama
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route
from strands import Agent
from tests.agent.agent_checks import PROMPT, settled

from voicestream.agent.app import free_port
from voicestream.agent.llm import (
    SYSTEM_PROMPT,
    LLMConfigError,
    create_model,
    stream_text,
    system_prompt,
)
from voicestream.agent.local_llm import LocalLlamaModel, LocalModelError, default_model_path
from voicestream.cpus import CPU_USE


async def answer(agent_or_model, prompt: str = PROMPT) -> list[str]:
    async with asyncio.timeout(60):
        return [delta async for delta in stream_text(agent_or_model, prompt)]


async def test_local_model_streams_text_deltas(local_llm):
    deltas = await answer(local_llm)

    # unseeded, the answer may be one short sentence ("The sky is blue.": five deltas)
    assert len(deltas) > 1 and all(deltas)
    assert len(deltas) <= local_llm.get_config()["max_tokens"]  # one delta per token, capped
    assert "sky" in "".join(deltas).lower()


async def test_local_model_streams_through_a_strands_agent(local_llm):
    agent = Agent(model=local_llm, system_prompt=SYSTEM_PROMPT, callback_handler=None)

    deltas = await answer(agent)

    assert len(deltas) > 1 and "".join(deltas).strip()  # streamed, not one block (unseeded: may be short)


def _prompt_tokens_counter(model: LocalLlamaModel) -> Callable[[], int]:
    """llama.cpp's own count of prompt tokens evaluated by ``model``, from zero now."""
    import llama_cpp

    context = model._loaded()._ctx.ctx
    llama_cpp.llama_perf_context_reset(context)
    return lambda: llama_cpp.llama_perf_context(context).n_p_eval


async def test_a_seeded_model_prefills_each_system_prompt_once_and_answers_alike() -> None:
    """A seeded answer starts from the saved prefill of its system prompt: after the first
    answer only the question's own tokens are evaluated (llama.cpp's counters), a new
    language's system prompt is prefilled once, and the same question gets the same answer
    after others. Before, every seeded answer evaluated its whole prompt afresh."""
    model = create_model("local", max_tokens=8, seed=7, n_threads=1)
    assert isinstance(model, LocalLlamaModel)

    async def evaluated(prompt: str, language: str = "en-us") -> tuple[int, str]:
        counted = _prompt_tokens_counter(model)
        async with asyncio.timeout(60):
            text = "".join([delta async for delta in stream_text(model, prompt, language)])
        return counted(), text

    first, first_text = await evaluated("What is a black hole?")
    other, _ = await evaluated("Why is the sky blue?")
    french, _ = await evaluated("Why is the sky blue?", "fr-fr")
    again, again_text = await evaluated("What is a black hole?")

    prefill = 40  # the English system prompt is about 60 tokens, French's more
    assert first - other >= prefill, (first, other)  # the second answer did not prefill again
    assert french - other >= prefill, (french, other)  # a new system prompt is prefilled once
    assert first - again >= prefill, (first, again)
    assert again_text == first_text and first_text


async def test_the_agent_warms_its_local_model_up_to_the_system_prompt() -> None:
    """As the agent starts, its local model loads and evaluates the default system prompt
    in a thread, so that the first answer (unseeded, as `voicestream agent` runs it)
    evaluates only the question; before, it evaluated the whole prompt (about 75 tokens)."""
    from voicestream.agent.service import AgentService
    from voicestream.agent.settings import AgentSettings

    model = create_model("local", max_tokens=4, n_threads=1)
    assert isinstance(model, LocalLlamaModel)
    AgentService(AgentSettings(speech_url="http://127.0.0.1:9"), model).warm_up()
    warming = [thread for thread in threading.enumerate() if thread.name == "llm-load"]
    for thread in warming:
        thread.join(60)
    assert warming and not any(thread.is_alive() for thread in warming)
    counted = _prompt_tokens_counter(model)

    assert "".join(await answer(model, "Why is the sky blue?"))
    assert counted() < 30  # the question and its turn's marks


async def test_closing_the_stream_stops_the_local_model(long_winded_llm):
    stream = stream_text(long_winded_llm, "Tell me a very long story about a dragon.")
    async with asyncio.timeout(60):
        first = await anext(stream)
    await stream.aclose()

    assert first
    await settled(long_winded_llm)  # not the minutes that 4000 tokens would take


async def test_the_local_model_pauses_while_a_first_chunk_renders(long_winded_llm):
    """While urgent work (a first chunk) holds cores, no token is generated: the model
    waits between two tokens, and goes on once the cores are free."""
    loop = asyncio.get_running_loop()
    arrivals: list[float] = []

    async def read_all() -> None:
        async for _ in stream_text(long_winded_llm, "Tell me a very long story about a dragon."):
            arrivals.append(loop.time())

    reader = asyncio.create_task(read_all())
    try:
        async with asyncio.timeout(60):
            while not arrivals:
                await asyncio.sleep(0.01)
            with CPU_USE.claim_urgent(2):
                claimed = loop.time()
                await asyncio.sleep(1.5)
                released = loop.time()
            while not any(at > released for at in arrivals):
                await asyncio.sleep(0.01)
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
    # the token in progress when the claim began may still arrive; none after that
    during = [at for at in arrivals if claimed + 0.5 < at <= released]
    assert not during, f"{len(during)} tokens were generated while a first chunk held the cores"
    assert any(at < claimed for at in arrivals)
    await settled(long_winded_llm)


@pytest.fixture(scope="module")
def openai_compatible_server() -> Iterator[str]:
    """An OpenAI-compatible chat completions server on loopback, answering with SmolLM2 (a
    second copy, so that it never waits for the agent's)."""
    llama = Llama(model_path=str(default_model_path()), n_threads=2, verbose=False)
    lock = threading.Lock()

    async def completions(request: Request) -> StreamingResponse:
        body = await request.json()
        messages = [  # content may come as a list of parts; llama.cpp's template wants text
            {"role": m["role"], "content": _text_of(m["content"])} for m in body["messages"]
        ]

        def chunks() -> Iterator[str]:
            with lock:
                for chunk in llama.create_chat_completion(
                    messages=messages,
                    max_tokens=body.get("max_tokens", 60),
                    temperature=0.2,
                    repeat_penalty=1.1,
                    stream=True,
                ):
                    yield f"data: {json.dumps(chunk)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        threading.Event().wait(0.02)
    yield f"http://127.0.0.1:{server.config.port}/v1"
    server.should_exit = True
    thread.join(10)


def _text_of(content: str | list[dict[str, str]]) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


async def test_openai_provider_streams_from_a_compatible_server(openai_compatible_server):
    model = create_model(
        "openai", model="smollm2", base_url=openai_compatible_server, api_key="test", max_tokens=40
    )

    deltas = await answer(model)

    assert len(deltas) > 5 and "".join(deltas).strip()


def test_bedrock_provider_is_configured_without_calling_aws():
    model = create_model("bedrock", model="us.amazon.nova-lite-v1:0", region="eu-west-1")

    assert model.get_config()["model_id"] == "us.amazon.nova-lite-v1:0"
    assert model.get_config()["max_tokens"] == 300
    assert model.client.meta.region_name == "eu-west-1"


def test_local_provider_options(local_llm):
    model = create_model("local", max_tokens=42, temperature=0.5, n_threads=1)

    assert isinstance(model, LocalLlamaModel)
    config = model.get_config()
    assert (config["max_tokens"], config["temperature"], config["n_threads"]) == (42, 0.5, 1)
    assert config["model_path"] == str(default_model_path())


@pytest.mark.parametrize(
    ("provider", "options", "problem"),
    [
        ("gpt", {}, "unknown LLM provider 'gpt'"),
        ("openai", {}, "needs a model name"),
        ("openai", {"model": "gpt-4o-mini"}, "needs OPENAI_API_KEY"),
        ("bedrock", {"n_threads": 2}, "unknown options for bedrock: n_threads"),
        ("local", {"max_retries": 0}, "unknown options for local: max_retries"),
        ("local", {"max_tokens": 0}, "max_tokens must be at least 1"),
    ],
)
def test_create_model_explains_what_is_wrong(monkeypatch, provider, options, problem):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMConfigError, match=problem):
        create_model(provider, **options)


def test_missing_gguf_file_is_named(tmp_path):
    with pytest.raises(LocalModelError, match="no GGUF model file at"):
        create_model("local", model=str(tmp_path / "missing.gguf"))


def test_the_system_prompt_asks_for_the_voices_language() -> None:
    assert system_prompt("es").startswith(SYSTEM_PROMPT) and "answer in Spanish" in system_prompt("es")
    assert "Japanese" in system_prompt("ja") and "Chinese (Mandarin)" in system_prompt("zh")
    assert system_prompt("en-us") == system_prompt("en-gb") == SYSTEM_PROMPT
