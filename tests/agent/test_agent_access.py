"""The agent's access policy (`voicestream.access`, the same as the speech server's): no page
of another site spends its LLM, no rebinding name reaches it, and its key and its speech
server's key travel as headers."""

from __future__ import annotations

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from voicestream.agent.app import AgentSettings, create_app, running_agent
from voicestream.client import AsyncAgentClient


@pytest.mark.parametrize("content_type", ["text/plain;charset=UTF-8", "multipart/form-data; boundary=x", None])
def test_a_body_that_is_not_typed_json_gets_415(agent_url: str, agent_app, content_type: str | None) -> None:
    """A browser's simple request is refused; an untyped body comes from a browser (an untyped
    Blob) only with an Origin, which is what makes it refused."""
    headers = {"Content-Type": content_type} if content_type else {"Origin": "https://page.example.test"}
    refused = httpx.post(f"{agent_url}/invocations", content=b'{"prompt":"Hi."}', headers=headers, timeout=30)
    assert refused.status_code == 415
    assert refused.json()["error"]["code"] == "unsupported_media_type"
    assert agent_app.state.service.active_answers == 0


def test_a_rebinding_host_is_refused(agent_url: str) -> None:
    refused = httpx.post(f"{agent_url}/invocations", json={"prompt": "Hi."}, headers={"Host": "evil.example.test"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    assert httpx.get(f"{agent_url}/", headers={"Host": "evil.example.test"}).status_code == 403


async def test_a_websocket_from_another_site_is_refused(agent_url: str) -> None:
    with pytest.raises(InvalidStatus) as raised:
        await connect(agent_url.replace("http://", "ws://") + "/ws", origin="http://evil.example.test")  # type: ignore[arg-type]
    assert raised.value.response.status_code == 403


def test_the_policy_and_the_speech_key_come_from_the_environment() -> None:
    env = {"VOICESTREAM_ALLOWED_HOSTS": "agent.internal, *", "VOICESTREAM_SPEECH_API_KEY": "k"}
    settings = AgentSettings.from_env(env)
    assert settings.allowed_hosts == ("agent.internal", "*") and settings.speech_api_key == "k"


def test_a_key_in_the_speech_url_is_refused_at_start(speech_server: str, local_llm) -> None:
    with pytest.raises(ValueError, match="speech API key"):
        create_app(AgentSettings(speech_url=f"{speech_server}?key=k"), llm=local_llm)


async def test_keys_travel_as_headers_to_the_agent_and_to_its_speech_server(make_speech_server, local_llm) -> None:
    speech_url = make_speech_server(api_key="speech-key")
    settings = AgentSettings(speech_url=speech_url, api_key="agent-key", speech_api_key="speech-key")
    with running_agent(create_app(settings, llm=local_llm)) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            voices = await http.get(f"{url}/voices", headers={"Authorization": "Bearer agent-key"})
        async with AsyncAgentClient(url, api_key="agent-key", timeout_s=120) as client:
            answer = await client.ask("Say hello.")
    assert voices.status_code == 200 and voices.json()["voices"]
    assert answer.error is None and len(answer.audio) > 0
