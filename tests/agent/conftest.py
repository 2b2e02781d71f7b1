"""The agent's real parts: the local LLM (SmolLM2 through llama.cpp), the agent app served by
uvicorn on loopback, in front of the session's real speech server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from bedrock_agentcore.runtime import BedrockAgentCoreApp

from voicestream.agent.app import AgentSettings, create_app, running_agent
from voicestream.agent.llm import create_model
from voicestream.agent.local_llm import LocalLlamaModel

TEST_MAX_TOKENS = 60
"""Short answers (two or three sentences) keep the agent tests quick."""
TEST_THREADS = 1
"""The speech engine, Whisper and the LLM share the test machine's few cores: a single LLM
thread never spins waiting for a second one that the others have pushed off its core."""


@pytest.fixture(scope="session")
def local_llm() -> LocalLlamaModel:
    model = create_model("local", max_tokens=TEST_MAX_TOKENS, n_threads=TEST_THREADS)
    assert isinstance(model, LocalLlamaModel)
    model.load()
    return model


@pytest.fixture(scope="session")
def agent_app(speech_server: str, local_llm: LocalLlamaModel) -> BedrockAgentCoreApp:
    return create_app(AgentSettings(speech_url=speech_server), llm=local_llm)


@pytest.fixture(scope="session")
def agent_url(agent_app: BedrockAgentCoreApp) -> Iterator[str]:
    with running_agent(agent_app) as url:
        yield url


@pytest.fixture
def long_winded_llm(local_llm: LocalLlamaModel) -> Iterator[LocalLlamaModel]:
    """The local model allowed answers far longer than a test may take."""
    limit = local_llm.get_config()["max_tokens"]
    local_llm.update_config(max_tokens=4000)
    yield local_llm
    local_llm.update_config(max_tokens=limit)
