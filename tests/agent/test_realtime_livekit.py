"""LiveKit's `openai.realtime.RealtimeModel`, unchanged, against the agent's Realtime endpoint
(the real agent and speech server, an echo LLM): a session with LiveKit's defaults (semantic
VAD, with Smart Turn) that speaks one answer."""

from __future__ import annotations

import asyncio

import aiohttp
from tests.agent.realtime_checks import echo_agent


async def test_livekit_realtime_model_speaks_an_answer(speech_server):
    from livekit.agents import llm as lk
    from livekit.plugins.openai import realtime

    with echo_agent(speech_server) as (url, stub):
        async with aiohttp.ClientSession() as http, asyncio.timeout(120):
            model = realtime.RealtimeModel(
                base_url=url.replace("ws://", "http://") + "/v1",
                api_key="unused",
                http_session=http,
            )
            session = model.session()
            errors: list[object] = []
            session.on("error", errors.append)
            chat = lk.ChatContext()
            chat.add_message(role="user", content="Hello from LiveKit")
            await session.update_chat_ctx(chat)
            generation = await session.generate_reply()
            seconds, text = 0.0, []
            async for message in generation.message_stream:
                async for frame in message.audio_stream:
                    seconds += frame.duration
                text += [piece async for piece in message.text_stream]
            await session.aclose()
            await model.aclose()
        assert not errors
        assert seconds > 0.5
        assert "".join(text).strip() == "You said: Hello from LiveKit. I was sent 1 messages."
        assert [m["role"] for m in stub.requests[-1]["messages"] if m["role"] != "system"] == [
            "user"
        ]
