"""Client of the agent runtime: `POST /invocations` answered with Server-Sent Events.

`AsyncAgentClient` and `AgentClient` (the same shape, async and sync, as httpx's) send one
prompt and give back the agent's events (PROTOCOL.md section 2) as typed models, each
stamped with when it arrived on the caller's clock; `ask` collects a whole answer into an
`AgentAnswer` with its text, audio and the caller-side timings (first text, first audio,
total). The target is the agent's base URL, or a Bedrock AgentCore runtime ARN (which needs
the `aws` extra: boto3 blocks, so the async client reads it in a worker thread).

A client with a `session_id` holds one conversation: every answer is sent under that id
(the `X-Amzn-Bedrock-AgentCore-Runtime-Session-Id` header, or the runtime session of an
AgentCore invocation), so the agent remembers the earlier turns; `interrupted` tells it how
much of an answer the listener heard before cutting it short. Without one, each answer
stands alone.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, Self

import httpx

from voicestream.client.errors import AgentClientError
from voicestream.client.transport import bearer
from voicestream.protocol import (
    DEFAULT_VOICE,
    SESSION_HEADER,
    AgentEnd,
    AgentError,
    AgentEvent,
    AudioChunk,
    AudioStreamEnd,
    AudioStreamStart,
    Interruption,
    ProtocolError,
    SSEDecoder,
    TextDelta,
    load_json_object,
    new_session_id,
    parse_agent_event,
)

INVOCATIONS_PATH = "/invocations"
DEFAULT_TIMEOUT_S = 300.0
"""A long answer from a slow LLM on a CPU may take minutes to finish speaking."""
_AGENT_EVENT_TYPES = frozenset(
    {
        "transcript", "agent_start", "text_delta", "sentence", "audio_stream_start", "audio_chunk",
        "word_timestamps", "audio_stream_end", "agent_end", "error",
    }
)
_THREAD_QUEUE_SIZE = 64


@dataclass(frozen=True, slots=True)
class ReceivedEvent:
    """One agent event and when it arrived, in ms since the request was sent."""

    event: AgentEvent
    at_ms: float


@dataclass(slots=True)
class AgentAnswer:
    """One whole answer as the caller received it. Times in ms on the caller's clock, from
    sending the request; `end` holds the agent's own figures (on its clock)."""

    mode: str
    text: str = ""
    audio: bytearray = field(default_factory=bytearray, repr=False)
    format: str | None = None
    sample_rate: int | None = None
    chunks: int = 0
    audio_s: float = 0.0
    first_text_ms: float | None = None
    first_audio_ms: float | None = None
    total_ms: float = 0.0
    end: AgentEnd | None = None
    error: AgentError | None = None

    def add(self, received: ReceivedEvent) -> None:
        """Take in the next event of the answer."""
        event, at_ms = received.event, received.at_ms
        self.total_ms = at_ms
        if isinstance(event, TextDelta):
            self.text += event.text
            self.first_text_ms = at_ms if self.first_text_ms is None else self.first_text_ms
        elif isinstance(event, AudioStreamStart):
            self.format, self.sample_rate = event.format, event.sample_rate
        elif isinstance(event, AudioChunk):
            self.audio += event.audio()
            self.chunks += 1
            self.first_audio_ms = at_ms if self.first_audio_ms is None else self.first_audio_ms
        elif isinstance(event, AudioStreamEnd):
            self.audio_s = event.duration_s
        elif isinstance(event, AgentError):
            self.error = event
        elif isinstance(event, AgentEnd):
            self.end = event


def _payload(
    prompt: str, mode: str, voice: str, speed: float, interrupted: Interruption | None
) -> dict[str, Any]:
    payload: dict[str, Any] = {"prompt": prompt, "mode": mode, "voice": voice, "speed": speed}
    if interrupted is not None:
        payload["interrupted"] = interrupted.model_dump(exclude_none=True)
    return payload


class AgentEventReader:
    """The agent's answer without I/O: bytes of its event stream in, typed events with
    their arrival times out (ms since `started`, on the `time.perf_counter` clock)."""

    def __init__(self, started: float) -> None:
        self._decoder = SSEDecoder()
        self._started = started

    def feed(self, chunk: bytes, arrived: float) -> list[ReceivedEvent]:
        return self._read(self._decoder.feed(chunk), arrived)

    def finish(self, arrived: float) -> list[ReceivedEvent]:
        """The events the end of the stream completes."""
        return self._read(self._decoder.flush(), arrived)

    def _read(self, events: list[Any], arrived: float) -> list[ReceivedEvent]:
        at_ms = (arrived - self._started) * 1000
        received = []
        for sse in events:
            try:
                message = load_json_object(sse.data)
                if message.get("type") not in _AGENT_EVENT_TYPES:
                    continue  # an event of a newer agent
                received.append(ReceivedEvent(parse_agent_event(message), at_ms))
            except ProtocolError as error:
                raise AgentClientError(
                    f"the agent sent a malformed event: {error.message}", code="invalid_frame"
                ) from None
        return received


class _AgentClientBase[H: (httpx.Client, httpx.AsyncClient)]:
    """What both shells share: the target, the request they send and the errors they raise."""

    _http_class: type[H]

    def __init__(
        self,
        target: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        api_key: str | None = None,
        session_id: str | None = None,
    ) -> None:
        self.target = target
        self.timeout_s = timeout_s
        self.session_id = session_id
        self._headers = {"Accept": "text/event-stream", **bearer(api_key)}
        self._http: H = self._http_class(timeout=httpx.Timeout(timeout_s, connect=10.0))

    def _url(self) -> str:
        return self.target.rstrip("/") + INVOCATIONS_PATH

    def _request_headers(self) -> dict[str, str]:
        return self._headers | ({SESSION_HEADER: self.session_id} if self.session_id else {})

    def _agentcore(self, payload: Any) -> Iterator[tuple[float, bytes]] | None:
        """The (blocking) chunks of an AgentCore invocation when the target is a runtime
        ARN; None for an agent reached over HTTP."""
        if not self.target.startswith("arn:"):
            return None
        return _agentcore_chunks(self.target, payload, self.timeout_s, self.session_id)

    def _refused(self, status: int, body: bytes) -> AgentClientError:
        detail = body.decode("utf-8", "replace")[:300]
        return AgentClientError(
            f"the agent at {self._url()} answered HTTP {status}: {detail}", code=f"http_{status}"
        )

    def _unreachable(self, error: httpx.HTTPError) -> AgentClientError:
        return AgentClientError(
            f"cannot reach the agent at {self.target}: {error!r}", code="connection_lost"
        )


class AgentClient(_AgentClientBase[httpx.Client]):
    """The agent at `target` (base URL or AgentCore runtime ARN), synchronously; `api_key` is
    sent as `Authorization: Bearer KEY` to an agent that has one (an ARN uses IAM instead);
    with a `session_id` (see `new_session_id`), one conversation."""

    _http_class = httpx.Client

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def events(
        self, prompt: str, mode: str = "bidi", voice: str = DEFAULT_VOICE, speed: float = 1.0,
        *, interrupted: Interruption | None = None,
    ) -> Iterator[ReceivedEvent]:
        """The answer's events as they arrive; raises `AgentClientError` if the agent
        cannot be reached (an answer that fails ends with its `error` event instead).
        `interrupted`: how much of an earlier answer of this conversation was heard."""
        return self.post(_payload(prompt, mode, voice, speed, interrupted))

    def post(self, payload: Any) -> Iterator[ReceivedEvent]:
        """The events answering any JSON `payload` (`events` builds a valid one)."""
        reader = AgentEventReader(time.perf_counter())
        for arrived, chunk in self._agentcore(payload) or self._http_chunks(payload):
            yield from reader.feed(chunk, arrived)
        yield from reader.finish(time.perf_counter())

    def ask(
        self, prompt: str, mode: str = "bidi", voice: str = DEFAULT_VOICE, speed: float = 1.0,
        *, interrupted: Interruption | None = None,
    ) -> AgentAnswer:
        """The whole answer, with the caller-side timings."""
        answer = AgentAnswer(mode)
        for received in self.events(prompt, mode, voice, speed, interrupted=interrupted):
            answer.add(received)
        return answer

    def _http_chunks(self, payload: Any) -> Iterator[tuple[float, bytes]]:
        try:
            with self._http.stream(
                "POST", self._url(), json=payload, headers=self._request_headers()
            ) as response:
                if response.status_code != 200:
                    raise self._refused(response.status_code, response.read())
                for chunk in response.iter_raw():
                    yield time.perf_counter(), chunk
        except httpx.HTTPError as error:
            raise self._unreachable(error) from error


class AsyncAgentClient(_AgentClientBase[httpx.AsyncClient]):
    """The agent at `target` (base URL or AgentCore runtime ARN), for asyncio: the same
    methods as `AgentClient`, awaited (an ARN's blocking SDK is read in a worker thread)."""

    _http_class = httpx.AsyncClient

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def events(
        self, prompt: str, mode: str = "bidi", voice: str = DEFAULT_VOICE, speed: float = 1.0,
        *, interrupted: Interruption | None = None,
    ) -> AsyncIterator[ReceivedEvent]:
        """As `AgentClient.events`."""
        async for received in self.post(_payload(prompt, mode, voice, speed, interrupted)):
            yield received

    async def post(self, payload: Any) -> AsyncIterator[ReceivedEvent]:
        """As `AgentClient.post`."""
        reader = AgentEventReader(time.perf_counter())
        blocking = self._agentcore(payload)
        chunks = self._http_chunks(payload) if blocking is None else _in_thread(blocking, self.timeout_s)
        async for arrived, chunk in chunks:
            for received in reader.feed(chunk, arrived):
                yield received
        for received in reader.finish(time.perf_counter()):
            yield received

    async def ask(
        self, prompt: str, mode: str = "bidi", voice: str = DEFAULT_VOICE, speed: float = 1.0,
        *, interrupted: Interruption | None = None,
    ) -> AgentAnswer:
        """As `AgentClient.ask`."""
        answer = AgentAnswer(mode)
        async for received in self.events(prompt, mode, voice, speed, interrupted=interrupted):
            answer.add(received)
        return answer

    async def _http_chunks(self, payload: Any) -> AsyncIterator[tuple[float, bytes]]:
        try:
            async with self._http.stream(
                "POST", self._url(), json=payload, headers=self._request_headers()
            ) as response:
                if response.status_code != 200:
                    raise self._refused(response.status_code, await response.aread())
                async for chunk in response.aiter_raw():
                    yield time.perf_counter(), chunk
        except httpx.HTTPError as error:
            raise self._unreachable(error) from error


def _agentcore_chunks(
    arn: str, payload: Any, timeout_s: float, session_id: str | None
) -> Iterator[tuple[float, bytes]]:
    """The raw event stream of a deployed AgentCore runtime, with arrival times; in the
    runtime session `session_id`, else in a fresh one."""
    try:
        import boto3
        from botocore.config import Config
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError as error:
        raise AgentClientError("an AgentCore ARN needs boto3: install the `aws` extra") from error
    client = boto3.client(
        "bedrock-agentcore", region_name=arn.split(":")[3], config=Config(read_timeout=int(timeout_s))
    )
    try:
        response = client.invoke_agent_runtime(
            agentRuntimeArn=arn,
            runtimeSessionId=session_id or new_session_id(),
            payload=json.dumps(payload).encode("utf-8"),
            contentType="application/json",
            accept="text/event-stream",
        )
        for chunk in response["response"].iter_chunks():
            yield time.perf_counter(), chunk
    except (BotoCoreError, ClientError) as error:
        raise AgentClientError(f"cannot invoke the AgentCore runtime {arn}: {error}") from error


async def _in_thread(chunks: Iterator[tuple[float, bytes]], timeout_s: float) -> AsyncIterator[tuple[float, bytes]]:
    """A blocking iterator read in a worker thread, through a bounded queue."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes] | BaseException | None] = asyncio.Queue(_THREAD_QUEUE_SIZE)
    stop = False

    def put(item: tuple[float, bytes] | BaseException | None) -> None:
        asyncio.run_coroutine_threadsafe(queue.put(item), loop).result(timeout_s)

    def read() -> None:
        try:
            for item in chunks:
                if stop:
                    return
                put(item)
            put(None)
        except BaseException as error:  # noqa: BLE001 - handed to the event loop
            put(error)

    reader = loop.run_in_executor(None, read)
    try:
        while (item := await asyncio.wait_for(queue.get(), timeout_s)) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop = True  # the reader returns at its next chunk
        while not queue.empty():
            queue.get_nowait()  # unblock a reader waiting to put
        if reader.done():
            await reader
