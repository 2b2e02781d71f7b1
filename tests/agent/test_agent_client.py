"""`AgentClient` / `AsyncAgentClient` against the real agent on loopback, and against small
real HTTP servers that answer badly."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from tests.agent.agent_checks import PROMPT

from voicestream.agent.app import free_port
from voicestream.asgi import serving
from voicestream.client import AgentClient, AgentClientError, AsyncAgentClient


def test_sync_client_collects_a_whole_answer_with_its_timings(agent_url: str) -> None:
    with AgentClient(agent_url, timeout_s=120) as client:
        answer = client.ask(PROMPT, "bidi")

    assert answer.error is None and answer.end is not None
    assert answer.text.strip() and answer.chunks > 0
    assert (answer.format, answer.sample_rate) == ("pcm16", 24000)
    assert len(answer.audio) / 2 / 24000 == pytest.approx(answer.audio_s, abs=0.01)
    assert 0 < answer.first_text_ms <= answer.first_audio_ms <= answer.total_ms  # type: ignore[operator]
    assert answer.end.ttfa_ms is not None and answer.end.first_sentence_ms is not None


def bad_agent() -> Starlette:
    """An agent that answers `POST /{kind}/invocations` badly in the way `kind` names."""

    async def invocations(request: Request) -> Response:
        kind = request.path_params["kind"]
        if kind == "overloaded":
            return PlainTextResponse("overloaded", status_code=503)
        if kind == "malformed":
            return Response(b'data: {"type":"text_delta","request_id":"r"}\n\n', media_type="text/event-stream")
        return Response(  # "newer": an event type this client does not know, between known ones
            b'data: {"type":"agent_start","request_id":"r","t_ms":0,"mode":"bidi"}\n\n'
            b'data: {"type":"from_the_future","request_id":"r","t_ms":1}\n\n'
            b'data: {"type":"agent_end","request_id":"r","t_ms":2}\n\n',
            media_type="text/event-stream",
        )

    return Starlette(routes=[Route("/{kind}/invocations", invocations, methods=["POST"])])


@pytest.fixture(scope="module")
def bad_agent_url() -> Iterator[str]:
    config = uvicorn.Config(bad_agent(), host="127.0.0.1", port=free_port(), log_level="warning")
    with serving(config, "bad-agent") as url:
        yield url


def test_failures_are_agent_client_errors(bad_agent_url: str) -> None:
    with AgentClient(f"{bad_agent_url}/overloaded") as client, pytest.raises(AgentClientError, match="HTTP 503"):
        client.ask("Hi.")
    with AgentClient(f"{bad_agent_url}/malformed") as client, pytest.raises(AgentClientError, match="malformed"):
        client.ask("Hi.")
    with AgentClient(f"http://127.0.0.1:{free_port()}") as client, pytest.raises(AgentClientError, match="cannot reach"):
        client.ask("Hi.")


async def test_unknown_event_types_are_skipped(bad_agent_url: str) -> None:
    async with AsyncAgentClient(f"{bad_agent_url}/newer") as client:
        answer = await client.ask("Hi.")
    assert answer.end is not None and answer.end.t_ms == 2 and answer.error is None
