"""Barge-in on the Realtime endpoint (the openai SDK's client, the real agent, speech server,
Silero VAD and Whisper, an echo LLM): speech over an answer cancels it at once, no audio of
it follows the cancel, the speech server stops rendering it, and a truncate keeps in the
conversation only the words heard, which the next answer's LLM request shows."""

from __future__ import annotations

import asyncio
import base64
import json
import string
from typing import Any

import httpx
from openai import AsyncOpenAI
from tests.agent.llm_stubs import echo
from tests.agent.realtime_checks import b64, checked, chunks, echo_agent, silence, spoken

from voicestream.protocol import SESSION_HEADER, new_session_id


async def cancelled_requests(speech_server: str) -> float:
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"{speech_server}/metrics")).text
    prefix = 'voicestream_requests_ended_total{state="cancelled"} '
    return next(
        (float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix)), 0.0
    )


async def remembered(service: Any, conversation: str) -> list[str]:
    """The texts of a conversation's finished turns, once the interrupted one has finished."""
    async with asyncio.timeout(30):
        while len(history := service.conversations.history(conversation)) < 2:
            await asyncio.sleep(0.05)
    return [block["text"] for message in history for block in message["content"]]


def bare(text: str) -> str:
    return text.strip().rstrip(string.punctuation)


async def test_speech_over_an_answer_cancels_it_and_the_conversation_keeps_what_was_heard(
    speech_server,
):
    services: list[Any] = []
    conversation = new_session_id()
    with echo_agent(speech_server, services) as (url, llm):
        client = AsyncOpenAI(api_key="unused", websocket_base_url=f"{url}/v1")
        async with (
            asyncio.timeout(240),
            client.realtime.connect(
                model="gpt-realtime", extra_headers={SESSION_HEADER: conversation}
            ) as connection,
        ):

            async def next_event() -> dict[str, Any]:
                return checked(json.loads(await connection.recv_bytes()))

            await connection.session.update(
                session={
                    "type": "realtime",
                    "audio": {
                        "input": {
                            "turn_detection": {
                                "type": "server_vad",
                                "create_response": False,
                                "interrupt_response": True,
                            },
                        }
                    },
                }
            )
            cancelled_before = await cancelled_requests(speech_server)
            await connection.conversation.item.create(
                item={
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Please give me a long answer"}],
                }
            )
            await connection.response.create()

            # Play along until two words of the answer have been released with its audio.
            audio_bytes, released, answer = 0, [], None
            while len(released) < 2:
                event = await next_event()
                if event["type"] == "response.created":
                    answer = event["response"]["id"]
                elif event["type"] == "response.output_item.added":
                    item_id = event["item"]["id"]
                elif event["type"] == "response.output_audio.delta":
                    audio_bytes += len(base64.b64decode(event["delta"]))
                elif event["type"] == "response.output_audio_transcript.delta":
                    released.append(event["delta"])
            heard_ms = audio_bytes * 1000 // 48000

            interruption = silence(0.3) + spoken(speech_server, "Wait a moment.") + silence(1.0)
            for piece in chunks(interruption):
                await connection.input_audio_buffer.append(audio=b64(piece))
            after_started: list[dict[str, Any]] = []
            started = done = None
            while True:
                event = await next_event()
                if started is not None:
                    after_started.append(event)
                if event["type"] == "input_audio_buffer.speech_started":
                    started = event
                if event["type"] == "response.done":
                    done = event["response"]
                if event["type"] == "conversation.item.input_audio_transcription.completed":
                    break
            # OpenAI's order: speech_started, then the cut answer's closing events and its
            # response.done (cancelled); none of its audio or transcript after speech_started.
            assert started is not None and done in [e.get("response") for e in after_started]
            assert done["id"] == answer and done["status"] == "cancelled"
            assert done["status_details"]["reason"] == "turn_detected"
            cut = [e for e in after_started if e.get("response_id") == answer]
            assert not [e for e in cut if e["type"].endswith(".delta")]

            # Before any truncate, the server's own estimate of what was heard (the real
            # time since the first audio went out): a word-cut prefix, not the whole answer.
            whole = echo(llm.requests[0]["messages"])
            estimate = (await remembered(services[0], conversation))[1]
            assert estimate and whole.startswith(estimate) and len(estimate) < len(whole)

            await connection.conversation.item.truncate(
                item_id=item_id, content_index=0, audio_end_ms=heard_ms
            )
            while (event := await next_event())["type"] != "conversation.item.truncated":
                pass
            assert event["audio_end_ms"] == heard_ms
            await connection.response.create()
            while (event := await next_event())["type"] != "response.done":
                pass
            assert event["response"]["status"] == "completed"

        # What the LLM was sent for the next answer: the cut answer, to the word heard.
        messages = [m for m in llm.requests[-1]["messages"] if m["role"] != "system"]
        said = [m["role"] for m in messages]
        assert said == ["user", "assistant", "user"]
        kept = (
            messages[1]["content"]
            if isinstance(messages[1]["content"], str)
            else messages[1]["content"][0]["text"]
        )
        assert bare(kept) == bare("".join(released))
        # The speech server stopped rendering the cancelled answer.
        async with asyncio.timeout(30):
            while await cancelled_requests(speech_server) <= cancelled_before:
                await asyncio.sleep(0.1)
