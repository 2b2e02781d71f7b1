"""The Realtime socket, message by message (a plain WebSocket client, the real agent and
speech server, an echo LLM): the access policy, AgentCore's `/ws` keyed by its session
header, telephony audio, and what is not supported answered with an `error` on an open
socket."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest
from tests.agent.realtime_checks import b64, checked, chunks, echo_agent, silence, spoken
from tests.server.test_send_buffer import accepted_send_buffer
from tests.server.wire import open_non_reader, until_dropped
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from voicestream.agent.runtime import AnswerLimits
from voicestream.audio import mulaw_to_float
from voicestream.limits import SEND_BUFFER_BYTES
from voicestream.protocol import SESSION_HEADER, new_session_id

KEY = "realtime-test-key"


@pytest.fixture(scope="module")
def agent(speech_server: str) -> Iterator[tuple[str, Any]]:
    with echo_agent(speech_server, api_key=KEY) as running:
        yield running


async def send(ws: ClientConnection, **event: Any) -> None:
    await ws.send(json.dumps(event))


async def until(ws: ClientConnection, last: str) -> list[dict[str, Any]]:
    events = []
    async with asyncio.timeout(120):
        while (event := checked(json.loads(await ws.recv())))["type"] != last:
            events.append(event)
    return [*events, event]


async def question(ws: ClientConnection, text: str, **response: Any) -> None:
    """Say `text` and ask for an answer (with `response`'s parameters, if any)."""
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    await send(ws, type="conversation.item.create", item=item)
    await send(ws, type="response.create", **({"response": response} if response else {}))


async def ask(ws: ClientConnection, text: str, **response: Any) -> list[dict[str, Any]]:
    await question(ws, text, **response)
    return await until(ws, "response.done")


async def text_only(ws: ClientConnection) -> None:
    """The socket's session, once opened, answers in text (no speech: cheaper)."""
    await until(ws, "session.created")
    await send(
        ws, type="session.update", session={"type": "realtime", "output_modalities": ["text"]}
    )
    await until(ws, "session.updated")


def text(content: str | list[dict[str, Any]]) -> str:
    return content if isinstance(content, str) else "".join(part["text"] for part in content)


async def test_the_socket_takes_a_key_as_a_header_or_subprotocol_and_never_in_the_url(agent):
    url, _ = agent
    for refused in (
        {},
        {"uri": f"{url}/v1/realtime?key={KEY}"},
        {
            "additional_headers": {"Authorization": f"Bearer {KEY}"},
            "origin": "http://evil.example.test",
        },
    ):
        with pytest.raises(InvalidStatus):
            await connect(refused.pop("uri", f"{url}/v1/realtime"), **refused)
    subprotocols = ["voicestream", f"voicestream.key.{KEY}"]
    async with connect(f"{url}/v1/realtime?model=anything", subprotocols=subprotocols) as ws:  # type: ignore[arg-type]
        assert ws.subprotocol == "voicestream"
        assert (await until(ws, "session.created"))[-1]["session"]["type"] == "realtime"


async def test_unsupported_requests_get_an_error_and_the_socket_stays_open(agent):
    url, _ = agent
    headers = {"Authorization": f"Bearer {KEY}"}
    async with connect(f"{url}/v1/realtime", additional_headers=headers) as ws:
        await until(ws, "session.created")
        tool = {"type": "function", "name": "weather", "parameters": {"type": "object"}}
        image = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_image", "image_url": "data:,"}],
        }
        for event, param in (
            (
                {"type": "session.update", "session": {"type": "realtime", "tools": [tool]}},
                "session.tools",
            ),
            ({"type": "conversation.item.create", "item": image}, "item.content"),
            (
                {
                    "type": "conversation.item.create",
                    "item": {"type": "function_call", "name": "f"},
                },
                "item.type",
            ),
            ({"type": "conversation.item.retrieve", "item_id": "x"}, "type"),
            (
                {"type": "session.update", "session": {"type": "realtime", "prompt": {"id": "p"}}},
                "session.prompt",
            ),
        ):
            await send(ws, event_id="client-1", **event)
            error = (await until(ws, "error"))[-1]["error"]
            assert (error["code"], error["param"], error["event_id"]) == (
                "unsupported",
                param,
                "client-1",
            )
        await send(ws, type="no.such.event")
        assert (await until(ws, "error"))[-1]["error"]["code"] == "invalid_event_type"
        await send(
            ws,
            type="conversation.item.truncate",
            item_id="item_nope",
            content_index=0,
            audio_end_ms=10,
        )
        assert (await until(ws, "error"))[-1]["error"]["code"] == "item_not_found"
        semantic = {"type": "semantic_vad", "eagerness": "medium", "interrupt_response": False}
        session = {
            "type": "realtime",
            "instructions": "Be brief.",
            "audio": {"input": {"turn_detection": semantic}},
        }
        await send(ws, type="session.update", session=session)
        updated = (await until(ws, "session.updated"))[-1]["session"]
        assert updated["instructions"] == "Be brief."
        detection = updated["audio"]["input"]["turn_detection"]
        assert (detection["type"], detection["eagerness"], detection["interrupt_response"]) == (
            "semantic_vad",
            "medium",
            False,
        )


async def test_agentcore_ws_keys_the_conversation_and_speaks_telephony_audio(agent):
    url, llm = agent
    headers = {"Authorization": f"Bearer {KEY}", SESSION_HEADER: new_session_id()}
    async with connect(f"{url}/ws", additional_headers=headers) as ws:
        await until(ws, "session.created")
        await ask(ws, "My name is Ada")
    async with connect(f"{url}/ws", additional_headers=headers) as ws:
        await until(ws, "session.created")
        await send(
            ws,
            type="session.update",
            session={
                "type": "realtime",
                "audio": {"output": {"format": {"type": "audio/pcmu"}, "voice": "marin"}},
            },
        )
        assert (await until(ws, "session.updated"))[-1]["session"]["audio"]["output"]["format"] == {
            "type": "audio/pcmu"
        }
        events = await ask(ws, "What is my name")
    said = [text(m["content"]) for m in llm.requests[-1]["messages"] if m["role"] != "system"]
    assert said[0] == "My name is Ada" and said[-1] == "What is my name"
    done = events[-1]["response"]
    assert done["status"] == "completed"
    assert (
        done["output"][0]["content"][0]["transcript"]
        == "You said: What is my name. I was sent 3 messages."
    )
    mulaw = b"".join(
        base64.b64decode(e["delta"]) for e in events if e["type"] == "response.output_audio.delta"
    )
    seconds = len(mulaw) / 8000
    assert 1.0 < seconds < 10.0, "G.711 at 8 kHz: one byte a sample"
    assert float(np.sqrt(np.mean(mulaw_to_float(mulaw) ** 2))) > 0.01, "speech, not silence"


async def test_a_deleted_item_leaves_the_stored_conversation(agent):
    """An answer deleted, and a turn deleted whole, are gone from what a later socket of the
    conversation (and `/invocations`) answers from; the question left joins the next one."""
    url, llm = agent
    headers = {"Authorization": f"Bearer {KEY}", SESSION_HEADER: new_session_id()}
    async with connect(f"{url}/ws", additional_headers=headers) as ws:
        await text_only(ws)
        for question, deleted in (
            ("My name is Ada", ("assistant",)),
            ("I live in Paris", ("user", "assistant")),
        ):
            events = await ask(ws, question)
            added = [e["item"] for e in events if e["type"] == "conversation.item.added"]
            for item in added:
                if item["role"] in deleted:
                    await send(ws, type="conversation.item.delete", item_id=item["id"])
                    deleted_id = (await until(ws, "conversation.item.deleted"))[-1]["item_id"]
                    assert deleted_id == item["id"]
    async with connect(f"{url}/ws", additional_headers=headers) as ws:
        await text_only(ws)
        await ask(ws, "Who am I")
    said = [text(m["content"]) for m in llm.requests[-1]["messages"] if m["role"] != "system"]
    assert said == ["My name is Ada\nWho am I"]


async def test_a_drain_sends_each_socket_away_once_it_has_nothing_left_to_send(speech_server):
    """A quiet socket goes away (1001) at once; one being answered gets its whole answer
    first; the drain ends with them (far inside its grace); a new socket gets `busy`."""
    services: list[Any] = []
    with echo_agent(speech_server, services) as (url, _):
        service = services[0]
        async with connect(f"{url}/v1/realtime") as quiet, connect(f"{url}/v1/realtime") as busy:
            for ws in (quiet, busy):
                await until(ws, "session.created")
            await question(busy, "Hi")
            await until(busy, "response.created")
            drain = asyncio.create_task(service.drain(grace_s=300))
            await asyncio.wait_for(quiet.wait_closed(), 30)
            assert quiet.close_code == 1001
            assert (await until(busy, "response.done"))[-1]["response"]["status"] == "completed"
            await asyncio.wait_for(busy.wait_closed(), 30)
            assert busy.close_code == 1001
            await asyncio.wait_for(drain, 30)
        assert not service.connections and service.active_answers == 0
        async with connect(f"{url}/v1/realtime") as late:
            assert (await until(late, "error"))[-1]["error"]["code"] == "busy"
            await asyncio.wait_for(late.wait_closed(), 30)
            assert late.close_code == 1001


async def test_an_idle_socket_closes_at_the_idle_bound(speech_server):
    """With `realtime_idle_s` set shorter than an answer, the answer still arrives whole (the
    socket is not idle meanwhile); the idle clock starts at the socket's last event (the
    answer's `response.done`), so the silent socket is closed (1000) a whole bound after it,
    never sooner, and forgotten."""
    services: list[Any] = []
    idle_s = 2.0
    limits = AnswerLimits(realtime_idle_s=idle_s)
    with echo_agent(speech_server, services, limits=limits) as (url, _):
        async with connect(f"{url}/v1/realtime") as ws:
            await until(ws, "session.created")
            assert (await ask(ws, "Hi"))[-1]["response"]["status"] == "completed"
            done_at = time.monotonic()
            await asyncio.wait_for(ws.wait_closed(), 30)
            quiet_s = time.monotonic() - done_at
        assert ws.close_code == 1000
        # a lower bound only (the server may not close sooner); half of it is left to the
        # client's own delays in reading response.done
        assert quiet_s >= idle_s / 2, f"closed {quiet_s:.2f} s after the last event; the bound is {idle_s} s"
        async with asyncio.timeout(10):
            while services[0].connections:
                await asyncio.sleep(0.01)


def test_the_agent_fixes_each_connection_send_buffer(agent):
    """The agent's end of each connection has the speech server's fixed send buffer (Linux
    reports twice what was set): left to autotuning, megabytes of answer would sit in the
    kernel before the Realtime send timeout began."""
    url, _ = agent
    assert accepted_send_buffer(urlsplit(url).port or 0) == 2 * SEND_BUFFER_BYTES


async def test_a_client_that_stops_reading_is_closed_at_the_send_timeout(speech_server, caplog):
    """A long spoken answer to a client that reads nothing (a 4 KB receive window; the agent's
    send buffer is fixed, as the speech server's): once the buffers are full a delta cannot
    leave within `realtime_send_s`, so the agent gives up on the socket (logged once), ends
    its answer and forgets it, while the client still holds its end open, and drops the
    connection (before, it sent a close the client never took, which held the connection,
    and the agent's shutdown 5 s more). Read from the agent's own accounting: its sockets,
    and the answers under way; and from the client's kernel: the connection's state."""
    services: list[Any] = []
    send_s = 2.0
    with echo_agent(speech_server, services, limits=AnswerLimits(realtime_send_s=send_s)) as (url, _):
        ws = await open_non_reader(url.replace("ws://", "http://"), f"{url}/v1/realtime")
        try:
            await question(ws, "Tell me a long story about the sea.")
            service = services[0]
            async with asyncio.timeout(120):
                while not service.connections:
                    await asyncio.sleep(0.01)
                while service.connections or service.active_answers:
                    await asyncio.sleep(0.05)
            assert not ws.transport.is_closing()  # the agent let go, not the client
            await until_dropped(ws)
        finally:
            ws.transport.abort()
    read_nothing = [r for r in caplog.records if "took no frame" in r.getMessage()]
    assert len(read_nothing) == 1, [r.getMessage() for r in read_nothing]
    assert f"for {send_s:g} s" in read_nothing[0].getMessage()


async def test_text_only_answers_ask_no_speech_server():
    """`output_modalities: ["text"]`, for the session or one response: the answer's text
    events, no audio, and no speech server (the agent's is an address nothing listens on)."""
    with echo_agent("ws://127.0.0.1:9") as (url, _):
        async with connect(f"{url}/v1/realtime") as ws:
            await until(ws, "session.created")
            once = await ask(ws, "Hi", output_modalities=["text"])
            await send(
                ws,
                type="session.update",
                session={"type": "realtime", "output_modalities": ["text"]},
            )
            await until(ws, "session.updated")
            again = await ask(ws, "Bye")
    for events, said in (
        (once, "You said: Hi. I was sent 1 messages."),
        (again, "You said: Bye. I was sent 3 messages."),
    ):
        kinds = {e["type"] for e in events}
        assert not any("audio" in kind for kind in kinds)
        assert (
            "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == said
        )
        assert next(e for e in events if e["type"] == "response.output_text.done")["text"] == said
        done = events[-1]["response"]
        assert (done["status"], done["output_modalities"]) == ("completed", ["text"])
        assert done["output"][0]["content"] == [{"type": "output_text", "text": said}]


async def test_the_user_turn_is_transcribed_while_it_is_spoken(agent, speech_server):
    """With `audio.input.transcription` set, a turn still being spoken gets
    `input_audio_transcription.delta`s for its item, before it is committed and completed."""
    url, _ = agent
    words = "Hello there, this is a test of the interim transcription."
    speech = spoken(speech_server, words)
    headers = {"Authorization": f"Bearer {KEY}"}
    async with connect(f"{url}/v1/realtime", additional_headers=headers) as ws:
        await until(ws, "session.created")
        detection = {"type": "server_vad", "silence_duration_ms": 1000, "create_response": False}
        audio = {"input": {"transcription": {"model": "whisper-1"}, "turn_detection": detection}}
        await send(ws, type="session.update", session={"type": "realtime", "audio": audio})
        await until(ws, "session.updated")
        await send(ws, type="input_audio_buffer.append", audio=b64(speech))
        spoken_part = await until(ws, "conversation.item.input_audio_transcription.delta")
        await send(ws, type="input_audio_buffer.append", audio=b64(silence(1.5)))
        rest = await until(ws, "conversation.item.input_audio_transcription.completed")
    kinds = [e["type"] for e in spoken_part]
    assert "input_audio_buffer.speech_started" in kinds
    assert "input_audio_buffer.speech_stopped" not in kinds, "the delta came while speaking"
    committed = next(e for e in rest if e["type"] == "input_audio_buffer.committed")
    assert spoken_part[-1]["item_id"] == committed["item_id"] == rest[-1]["item_id"]
    first_word = spoken_part[-1]["delta"].split()[0].strip(",.").lower()
    assert first_word == rest[-1]["transcript"].split()[0].strip(",.").lower() == "hello"


async def test_a_spoken_turn_the_agent_cannot_answer_gets_a_busy_error(speech_server):
    """Server VAD's own response, refused (no answer slot: at `max_answers`, or draining),
    is said to the client as an `error` (`busy`) on an open socket."""
    with echo_agent(speech_server, limits=AnswerLimits(max_answers=0)) as (url, _):
        async with connect(f"{url}/v1/realtime") as ws:
            await until(ws, "session.created")
            speech = spoken(speech_server, "Hello there.") + silence(1.0)
            await send(ws, type="input_audio_buffer.append", audio=b64(speech))
            events = await until(ws, "error")
            assert events[-1]["error"]["code"] == "busy"
            assert "conversation.item.input_audio_transcription.completed" in {
                e["type"] for e in events
            }
            await send(ws, type="input_audio_buffer.clear")
            await until(ws, "input_audio_buffer.cleared")


async def test_a_turn_is_heard_at_its_last_pause_and_not_again_after_its_silence(speech_server):
    """Server VAD starts a turn's transcription at each pause (`vad.PAUSE_MS` of silence), so
    that its answer need not wait for Whisper once the silence duration has ended the turn. A
    pause the speaker goes on from is dropped: the transcript holds both halves. The one used
    heard the turn up to its last pause, less audio than the committed turn (which ends a
    whole silence duration later); no pass follows the commit."""
    services: list[Any] = []
    with echo_agent(speech_server, services) as (url, _):
        recognizer = services[0].recognizer
        transcribe = recognizer.transcribe_async
        heard: list[int] = []

        async def counted(samples: Any, *args: Any) -> str:
            heard.append(len(samples))
            return await transcribe(samples, *args)

        recognizer.transcribe_async = counted
        async with connect(f"{url}/v1/realtime") as ws:
            await until(ws, "session.created")
            detection = {"type": "server_vad", "silence_duration_ms": 1000, "create_response": False}
            audio = {"input": {"turn_detection": detection}}
            await send(ws, type="session.update", session={"type": "realtime", "audio": audio})
            await until(ws, "session.updated")
            speech = (
                spoken(speech_server, "Hello there.")
                + silence(0.3)
                + spoken(speech_server, "How are you today?")
                + silence(1.5)
            )
            for piece in chunks(speech):
                await send(ws, type="input_audio_buffer.append", audio=b64(piece))
            events = await until(ws, "conversation.item.input_audio_transcription.completed")
    assert [e["type"] for e in events].count("input_audio_buffer.speech_stopped") == 1
    transcript = events[-1]["transcript"].lower()
    assert "hello there" in transcript and "how are you today" in transcript
    committed = round(events[-1]["usage"]["seconds"] * 16000)
    assert len(heard) >= 2, "a pass at the pause between the sentences, one at the last"
    assert heard[-1] <= committed - 0.3 * 16000, "the last pass heard the turn at its pause"
