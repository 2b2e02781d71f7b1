"""The LLM behind the agent, through Strands Agents: a local model, any OpenAI-compatible
server, or Amazon Bedrock; and `stream_text`, which turns a Strands stream into text deltas."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncGenerator
from typing import Any

from strands import Agent
from strands.models import Model
from strands.types.content import Messages
from strands.types.exceptions import MaxTokensReachedException

from voicestream.protocol import DEFAULT_LANGUAGE, LANGUAGES

PROVIDERS = ("local", "openai", "bedrock")
DEFAULT_MAX_TOKENS = 300
DEFAULT_BEDROCK_MODEL = "us.amazon.nova-lite-v1:0"

SYSTEM_PROMPT = (
    "You are a friendly voice assistant. Everything you write is read aloud, so answer in "
    "plain, complete sentences of ordinary prose, two to five of them. Never use markdown, "
    "lists, headings, code, tables, links or emoji."
)
"""Asks for answers a speech engine can read as they are: prose, no formatting."""


def system_prompt(language: str = DEFAULT_LANGUAGE) -> str:
    """`SYSTEM_PROMPT`, asking for answers in `language` when the voice speaks another one
    than English (a small local model otherwise answers a Spanish voice in English)."""
    if language.startswith("en") or language not in LANGUAGES:
        return SYSTEM_PROMPT
    return f"{SYSTEM_PROMPT} Always answer in {LANGUAGES[language].name}, whatever language the user writes in."


class LLMConfigError(ValueError):
    """The LLM provider cannot be built from the options given."""


def create_model(
    provider: str = "local",
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    region: str | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    temperature: float | None = None,
    **options: Any,
) -> Model:
    """A Strands model for `provider`: ``local``, ``openai`` or ``bedrock``.

    - ``local``: SmolLM2-135M-Instruct in process (`model` may be another GGUF file's path);
      extra options (``n_threads``, ``n_ctx``, ``repeat_penalty``, ``seed``) go to
      `LocalLlamaModel`.
    - ``openai``: any OpenAI-compatible server at `base_url` (default: OpenAI's); the key is
      `api_key` or ``OPENAI_API_KEY``; `model` is required. Extra options go to the OpenAI client
      (``max_retries``, ``timeout``).
    - ``bedrock``: `model` is a Bedrock model id (default Amazon Nova Lite), `region` an AWS
      region (default from the AWS configuration), `base_url` another Bedrock runtime
      endpoint (a VPC endpoint) than the region's.

    Loading is deferred: nothing is read or contacted until the first answer (see
    `LocalLlamaModel.load` to load the local weights ahead of time).
    """
    if max_tokens < 1:
        raise LLMConfigError("max_tokens must be at least 1")
    if provider == "local":
        from voicestream.agent.local_llm import LocalLlamaModel

        _check_options("local", options, {"n_threads", "n_ctx", "repeat_penalty", "seed"})
        local_options: dict[str, Any] = {"max_tokens": max_tokens, **options}
        if temperature is not None:
            local_options["temperature"] = temperature
        return LocalLlamaModel(model, **local_options)
    if provider == "openai":
        from strands.models.openai import OpenAIModel

        if not model:
            raise LLMConfigError("the openai provider needs a model name (--model)")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key and base_url is None:
            raise LLMConfigError(
                "the openai provider needs OPENAI_API_KEY (or --base-url for a local server)"
            )
        client_args: dict[str, Any] = {"api_key": key or "unused", **options}
        if base_url:
            client_args["base_url"] = base_url
        params: dict[str, Any] = {"max_tokens": max_tokens}
        if temperature is not None:
            params["temperature"] = temperature
        return OpenAIModel(client_args=client_args, model_id=model, params=params)
    if provider == "bedrock":
        from strands.models import BedrockModel

        _check_options("bedrock", options, set())
        bedrock_options: dict[str, Any] = {"max_tokens": max_tokens}
        if temperature is not None:
            bedrock_options["temperature"] = temperature
        return BedrockModel(
            model_id=model or DEFAULT_BEDROCK_MODEL,
            region_name=region,
            endpoint_url=base_url,
            **bedrock_options,
        )
    raise LLMConfigError(f"unknown LLM provider {provider!r}: choose {', '.join(PROVIDERS)}")


def _check_options(provider: str, options: dict[str, Any], known: set[str]) -> None:
    if unknown := sorted(set(options) - known):
        raise LLMConfigError(f"unknown options for {provider}: {', '.join(unknown)}")


async def stream_text(
    agent_or_model: Agent | Model, prompt: str | Messages, language: str = DEFAULT_LANGUAGE
) -> AsyncGenerator[str, None]:
    """The answer to `prompt`, as the text deltas the model streams.

    `prompt` is the question, or the conversation so far as chat messages ending with it (see
    `conversation.chat`). A model is streamed directly, with `system_prompt(language)`, those
    messages and no tools: that is all a spoken answer needs, and every provider reads the
    messages as its own chat turns; closing this generator closes the model's stream, which
    stops its generation at once (the local model at the next token). An agent is streamed
    through `Agent.stream_async` with its own system prompt and tools, and only the question:
    it keeps its own conversation. Closing this generator cancels it through Strands' cancel
    signal and runs its stream out.

    Reaching the token cap ends the answer normally: the cap is ours, not a failure.
    """
    messages: Messages = (
        [{"role": "user", "content": [{"text": prompt}]}] if isinstance(prompt, str) else prompt
    )
    if isinstance(agent_or_model, Agent):
        question = "".join(block.get("text", "") for block in messages[-1]["content"])
        async with contextlib.aclosing(_agent_text(agent_or_model, question)) as texts:
            async for text in texts:
                yield text
        return
    stream = agent_or_model.stream(messages, system_prompt=system_prompt(language))
    try:
        async for event in stream:
            text = event.get("contentBlockDelta", {}).get("delta", {}).get("text")
            if text:
                yield text
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


async def _agent_text(agent: Agent, prompt: str) -> AsyncGenerator[str, None]:
    cancel = threading.Event()
    stream = agent.stream_async(prompt, cancel_signal=cancel)
    finished = False
    try:
        async for event in stream:
            text = event.get("data") if isinstance(event, dict) else None
            if text:
                yield text
        finished = True
    except MaxTokensReachedException:
        finished = True
    finally:
        if not finished:
            cancel.set()
            await _drain(stream)


async def _drain(stream: AsyncGenerator[Any, None], timeout_s: float = 2.0) -> None:
    """Run an abandoned answer's stream out (its failure is of no interest), then close it,
    so that no generator of it is left for the garbage collector to close out of context."""
    try:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(timeout_s):
                async for _ in stream:
                    pass
    finally:
        await stream.aclose()
