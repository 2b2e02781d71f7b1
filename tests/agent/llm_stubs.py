"""LLM servers on loopback that answer by echoing what they were sent, and keep every request:
an OpenAI-compatible chat completions server, and a fake of Amazon Bedrock's ConverseStream
(a remote AWS service, so a fake: it follows the documented shapes of the Converse API,
request and event stream, and nothing more).

The answer names the last question and how many messages came with it, so that a test sees
both what the agent sent and what it got back; a question asking for a long answer gets many
sentences (long enough to interrupt while it plays).
"""

from __future__ import annotations

import binascii
import contextlib
import json
import queue
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from voicestream.asgi import serving
from voicestream.server import free_port


def echo(messages: list[dict[str, Any]]) -> str:
    """The stubs' answer to `messages` (each with its text as `content` or `text` parts)."""
    question = _text(messages[-1]["content"])
    turns = [m for m in messages if m.get("role") != "system"]  # OpenAI's system message
    answer = f"You said: {question.rstrip('.?!')}. I was sent {len(turns)} messages."
    if "long" in question.lower():
        answer += "".join(f" This is sentence number {n} of a long answer." for n in range(1, 5))
    return answer


def _text(content: str | list[dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


def _words(text: str) -> list[str]:
    """The answer in pieces, as a model streams it: a word and its space at a time."""
    return [word + " " for word in text.split(" ")[:-1]] + [text.split(" ")[-1]]


@dataclass
class LLMStub:
    """A running stub: its base URL and every request body it received."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class HeldAnswer:
    """One answer held after its first sentence: when its request arrived, and its release."""

    arrived_at: float
    """``time.monotonic()`` when the request arrived."""
    timeout_s: float
    release: threading.Event = field(default_factory=threading.Event)

    def wait(self) -> None:
        """Until the test releases it, at most ``timeout_s`` (a test that fails never hangs)."""
        self.release.wait(self.timeout_s)


class AnswerHold:
    """Holds each answer after its first sentence and the next word (so that the sentence is
    seen to end) until the test lets it go, at most ``timeout_s``: a test orders what the LLM
    writes against what the caller hears by events, not by the machine's speed."""

    def __init__(self, timeout_s: float = 120.0) -> None:
        self.timeout_s = timeout_s
        self._arrivals: queue.Queue[HeldAnswer] = queue.Queue(maxsize=16)

    def arrive(self) -> HeldAnswer:
        held = HeldAnswer(time.monotonic(), self.timeout_s)
        self._arrivals.put_nowait(held)
        return held

    def next_answer(self, timeout_s: float) -> HeldAnswer:
        """The next request's held answer, once it has arrived (bounded)."""
        return self._arrivals.get(timeout=timeout_s)

    @staticmethod
    def held_from(pieces: list[str]) -> int:
        """The index of the first piece held back: two after the first sentence's last word."""
        ends = [i for i, piece in enumerate(pieces) if piece.rstrip().endswith((".", "?", "!"))]
        return min(ends[0] + 2, len(pieces)) if ends else len(pieces)


@contextlib.contextmanager
def _serve(routes: list[Route]) -> Iterator[str]:
    config = uvicorn.Config(
        Starlette(routes=routes), host="127.0.0.1", port=free_port(), log_level="warning"
    )
    with serving(config, "llm-stub") as url:
        yield url


@contextlib.contextmanager
def openai_echo_server(hold: AnswerHold | None = None) -> Iterator[LLMStub]:
    """`POST /v1/chat/completions` streaming the echo as chat.completion.chunk events; with a
    `hold`, each answer waits after its first sentence until the test releases it."""
    stub = LLMStub("")

    async def completions(request: Request) -> StreamingResponse:
        body = await request.json()
        stub.requests.append(body)
        held = hold.arrive() if hold is not None else None

        def chunks() -> Iterator[str]:
            base = {"id": "chatcmpl-echo", "object": "chat.completion.chunk",
                    "created": int(time.time()), "model": body["model"]}
            pieces = _words(echo(body["messages"]))
            held_from = AnswerHold.held_from(pieces) if held is not None else len(pieces)
            for index, piece in enumerate(pieces):
                if held is not None and index == held_from:
                    held.wait()
                delta = {"role": "assistant", "content": piece}
                yield _sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
            yield _sse({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            yield "data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    with _serve([Route("/v1/chat/completions", completions, methods=["POST"])]) as url:
        stub.url = f"{url}/v1"
        yield stub


def _sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data)}\n\n"


@contextlib.contextmanager
def fake_bedrock_runtime() -> Iterator[LLMStub]:
    """A fake of Bedrock's `POST /model/{modelId}/converse-stream`: it takes the Converse
    request (`messages` of `{"role", "content": [{"text"}]}`, `system`, `inferenceConfig`)
    and answers with the ConverseStream event stream (`application/vnd.amazon.eventstream`):
    messageStart, contentBlockDelta per word, contentBlockStop, messageStop, metadata."""
    stub = LLMStub("")

    async def converse_stream(request: Request) -> Response:
        body = await request.json()
        stub.requests.append(body)
        events = [("messageStart", {"role": "assistant"})]
        events += [
            ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}})
            for piece in _words(echo(body["messages"]))
        ]
        events += [
            ("contentBlockStop", {"contentBlockIndex": 0}),
            ("messageStop", {"stopReason": "end_turn"}),
            ("metadata", {"usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
                          "metrics": {"latencyMs": 1}}),
        ]
        stream = b"".join(_event_message(kind, payload) for kind, payload in events)
        return Response(stream, media_type="application/vnd.amazon.eventstream")

    route = Route("/model/{model_id:path}/converse-stream", converse_stream, methods=["POST"])
    with _serve([route]) as url:
        stub.url = url
        yield stub


def _event_message(event_type: str, payload: dict[str, Any]) -> bytes:
    """One message of the AWS event stream encoding: prelude (total and headers length, their
    CRC32), string headers, the JSON payload, the message's CRC32."""
    headers = b"".join(
        _string_header(name, value)
        for name, value in (
            (":event-type", event_type),
            (":content-type", "application/json"),
            (":message-type", "event"),
        )
    )
    body = json.dumps(payload).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    message = prelude + headers + body
    return message + struct.pack(">I", binascii.crc32(message))


def _string_header(name: str, value: str) -> bytes:
    encoded = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(encoded)) + encoded
