"""The agent as a Bedrock AgentCore runtime: `POST /invocations` answers with the events of
PROTOCOL.md section 2 as Server-Sent Events, `GET /ping` says `{"status":"Healthy"}`.

`BedrockAgentCoreApp` provides the routes, the request context and the health check. Its
entrypoint here is an async function that returns the event stream as a Starlette response,
rather than an async generator: AgentCore bridges a generator entrypoint through a worker
thread and a queue, and when the caller hangs up, that bridge leaves the answer running
until the garbage collector happens to close it (the LLM still writing, the speech session
still open). Our `EventStream` response closes the answer the moment the response ends,
however it ends. The answer never blocks the event loop (the LLM runs in a thread, the rest
is I/O), so `/ping` stays responsive all the same.

The app also serves the agent page (`GET /`, static files of `voicestream.web`) and the
speech server's voice list (`GET /voices`, fetched from it). A spoken question (`audio`
instead of `prompt`) is transcribed first (`speech_input`), then answered like a typed one;
the transcription counts inside the answer's deadline. Request bodies are capped
(`BodyLimit`) before the framework reads them.

The same app runs on AgentCore (in the container of docker/agent.Dockerfile, port 8080), and
on one machine (`voicestream agent`, `serve_agent`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import uvicorn
from bedrock_agentcore.runtime import BedrockAgentCoreApp, RequestContext
from starlette.responses import JSONResponse
from starlette.routing import WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strands.models import Model

from voicestream.access import AccessPolicy, parse_names, protect
from voicestream.agent.body_limit import BodyLimit
from voicestream.agent.conversation import ConversationLimits, ConversationStore
from voicestream.agent.llm import DEFAULT_MAX_TOKENS, create_model, system_prompt
from voicestream.agent.local_llm import DEFAULT_LOCAL_THREADS
from voicestream.agent.realtime import RealtimeSocket, serve_realtime
from voicestream.agent.runtime import (
    DEFAULT_CHUNK_SENTENCES,
    DEFAULT_FIRST_CLAUSE_WORDS,
    AnswerLimits,
    run,
    speech_transport,
)
from voicestream.agent.speech_input import SpeechRecognizer
from voicestream.agent.ticking import Tick, ticking
from voicestream.agent.voices import voices_route
from voicestream.asgi import (
    CONNECTION_PROTOCOLS,
    BoundedStreamingResponse,
    DrainingServer,
    free_port,
    serving,
)
from voicestream.limits import SEND_BUFFER_BYTES
from voicestream.protocol import (
    MAX_SESSION_ID_CHARS,
    SESSION_HEADER,
    AgentAudioRequest,
    AgentEnd,
    AgentError,
    ErrorCode,
    ProtocolError,
    Transcript,
    encode_sse,
    new_request_id,
    parse_agent_request,
)
from voicestream.text import ChunkSchedule
from voicestream.web import AGENT_PAGE, page_routes

logger = logging.getLogger(__name__)

DEFAULT_SPEECH_URL = "ws://127.0.0.1:8080/invocations-bidirectional-stream"
DEFAULT_GRACE_S = 30.0
DEFAULT_AGENT_PORT = 8081
"""On one machine; in its container the agent listens on 8080, as AgentCore expects."""


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """Where the speech server is and which LLM answers.

    `speech_url` names the speech server: its WebSocket session URL or base URL, or
    `sagemaker://ENDPOINT_NAME` for a SageMaker endpoint (see `speech_transport`).
    `model` is the provider's model name (a Bedrock model id, an OpenAI model name, or for
    `local` the path of another GGUF file); `base_url` is an OpenAI-compatible server's URL;
    `region` the AWS region for Bedrock; `llm_threads` the CPU threads of the local model;
    `first_clause_words` sets bidi's short first chunk (latency mode), None (0 in the
    environment) turns it off; `chunk_sentences` how many sentences each later chunk holds
    (see `ChunkSchedule`); `asr_model` is the Whisper model of voice input, a directory or
    Hugging Face id (None: `speech_input.default_asr_model`). `api_key`, `cors_origins` and
    `allowed_hosts` are the agent's own access policy (`voicestream.access`);
    `speech_api_key` is the key the agent sends to the speech server (as a header);
    `conversations` bound what is remembered of each conversation (see
    `ConversationLimits`).
    """

    speech_url: str = DEFAULT_SPEECH_URL
    llm: str = "local"
    model: str | None = None
    base_url: str | None = None
    region: str | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    llm_threads: int = DEFAULT_LOCAL_THREADS
    first_clause_words: int | None = DEFAULT_FIRST_CLAUSE_WORDS
    chunk_sentences: tuple[int, ...] = DEFAULT_CHUNK_SENTENCES
    limits: AnswerLimits = field(default_factory=AnswerLimits)
    api_key: str | None = None
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    speech_api_key: str | None = None
    asr_model: str | None = None
    conversations: ConversationLimits = field(default_factory=ConversationLimits)

    def __post_init__(self) -> None:
        self.schedule  # noqa: B018 - a bad schedule fails when the settings are made

    @property
    def schedule(self) -> ChunkSchedule:
        return ChunkSchedule(self.first_clause_words or None, self.chunk_sentences)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> AgentSettings:
        """Settings from VOICESTREAM_SPEECH_URL, VOICESTREAM_LLM (local, openai or bedrock),
        VOICESTREAM_LLM_MODEL, VOICESTREAM_LLM_BASE_URL, VOICESTREAM_LLM_MAX_TOKENS,
        VOICESTREAM_LLM_THREADS, VOICESTREAM_FIRST_CLAUSE_WORDS, VOICESTREAM_CHUNK_SCHEDULE
        (sentences per later chunk, such as "1,2"), AWS_REGION (or AWS_DEFAULT_REGION), the
        limits' variables (see `AnswerLimits.from_env`), the conversations' bounds (see
        `ConversationLimits.from_env`), VOICESTREAM_API_KEY,
        VOICESTREAM_CORS_ORIGINS and VOICESTREAM_ALLOWED_HOSTS (comma-separated),
        VOICESTREAM_SPEECH_API_KEY and VOICESTREAM_ASR_MODEL; `overrides`
        that are not None win (CLI options; 0 first clause words turns latency mode off there
        too)."""
        env = os.environ if environ is None else environ
        max_tokens = env.get("VOICESTREAM_LLM_MAX_TOKENS")
        threads = env.get("VOICESTREAM_LLM_THREADS")
        clause_words = env.get("VOICESTREAM_FIRST_CLAUSE_WORDS")
        chunk_schedule = env.get("VOICESTREAM_CHUNK_SCHEDULE")
        settings = cls(
            speech_url=env.get("VOICESTREAM_SPEECH_URL") or DEFAULT_SPEECH_URL,
            llm=env.get("VOICESTREAM_LLM") or "local",
            model=env.get("VOICESTREAM_LLM_MODEL") or None,
            base_url=env.get("VOICESTREAM_LLM_BASE_URL") or None,
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
            max_tokens=int(max_tokens) if max_tokens else DEFAULT_MAX_TOKENS,
            llm_threads=int(threads) if threads else DEFAULT_LOCAL_THREADS,
            first_clause_words=(
                int(clause_words) or None if clause_words else DEFAULT_FIRST_CLAUSE_WORDS
            ),
            chunk_sentences=(
                ChunkSchedule.parse(None, chunk_schedule).sentences
                if chunk_schedule
                else DEFAULT_CHUNK_SENTENCES
            ),
            limits=AnswerLimits.from_env(env),
            conversations=ConversationLimits.from_env(env),
            api_key=env.get("VOICESTREAM_API_KEY") or None,
            cors_origins=parse_names([env.get("VOICESTREAM_CORS_ORIGINS", "")]),
            allowed_hosts=parse_names([env.get("VOICESTREAM_ALLOWED_HOSTS", "")]),
            speech_api_key=env.get("VOICESTREAM_SPEECH_API_KEY") or None,
            asr_model=env.get("VOICESTREAM_ASR_MODEL") or None,
        )
        chosen = {k: v for k, v in overrides.items() if v is not None}
        if chosen.get("first_clause_words") == 0:
            chosen["first_clause_words"] = None
        return replace(settings, **chosen)

    def create_model(self) -> Model:
        """The LLM these settings name; raises `LLMConfigError` (or `LocalModelError`)."""
        local_options = {"n_threads": self.llm_threads} if self.llm == "local" else {}
        return create_model(
            self.llm,
            model=self.model,
            base_url=self.base_url,
            region=self.region,
            max_tokens=self.max_tokens,
            **local_options,
        )


SOCKETS_CLOSE_S = 5.0
"""After the grace period: how long Realtime sockets may take to close."""


def _refusal(code: ErrorCode, message: str) -> list[dict[str, Any]]:
    """An answer that ends before it starts: `error`, then `agent_end`."""
    request_id = new_request_id()
    return [
        _dump(AgentError(request_id=request_id, t_ms=0.0, code=code, message=message)),
        _dump(AgentEnd(request_id=request_id, t_ms=0.0)),
    ]


class AgentService:
    """What the app's entrypoint holds: the settings, the one LLM, the speech recognizer,
    the conversations, the answers in progress."""

    def __init__(self, settings: AgentSettings, llm: Model) -> None:
        self.settings = settings
        self.llm = llm
        self.recognizer = SpeechRecognizer(settings.asr_model)
        self.conversations = ConversationStore(settings.conversations)
        self.active_answers = 0
        self.draining = False
        self.sockets: set[RealtimeSocket] = set()
        """The open Realtime sockets (the drain sends each away once it is idle)."""
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """Load the local model's weights and evaluate the default language's system prompt
        in a thread, so that the first answer waits for neither (about 0.45 s here)."""
        load = getattr(self.llm, "load", None)
        if load is None:
            return
        prefill = getattr(self.llm, "prefill", None)

        def load_quietly() -> None:
            try:
                load()
                if prefill is not None:
                    prefill(system_prompt())
            except Exception:
                logger.exception("the local LLM failed to load")

        threading.Thread(target=load_quietly, name="llm-load", daemon=True).start()

    async def drain(self, grace_s: float) -> None:
        """Refuse new answers and sockets, wait up to `grace_s` for those under way to end:
        a Realtime socket goes away (1001) as soon as it has nothing left to send, and at
        the end of the grace whatever it holds (as the speech server's connections do)."""
        self.draining = True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace_s):
                while self.active_answers or self.sockets:
                    for socket in list(self.sockets):
                        if socket.idle:
                            socket.go_away()
                    await asyncio.sleep(0.05)
        for socket in list(self.sockets):
            socket.go_away()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(SOCKETS_CLOSE_S):
                while self.sockets:
                    await asyncio.sleep(0.05)

    def admit(self) -> bool:
        """Count one more answer under way, unless draining or at `max_answers`; each
        admitted answer is `release`d once."""
        with self._lock:
            if self.draining or self.active_answers >= self.settings.limits.max_answers:
                return False
            self.active_answers += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.active_answers -= 1

    async def answer(
        self, payload: Any, session_id: str | None = None
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The events for one invocation payload; a bad payload gives `error`, `agent_end`,
        and so does one beyond `max_answers` answers at once (`busy`, at once). A spoken
        question's answer starts with its `transcript`. With a `session_id` the answer
        knows the conversation's earlier turns, and becomes one of them."""
        limits = self.settings.limits
        if not self.admit():
            why = (
                "the agent is shutting down"
                if self.draining
                else f"the agent is already answering {limits.max_answers} requests"
            )
            for event in _refusal(ErrorCode.BUSY, f"{why}; try again shortly"):
                yield event
            return
        request_id = new_request_id()
        received = time.perf_counter()
        deadline = asyncio.get_running_loop().time() + limits.answer_timeout_s
        try:
            try:
                if not isinstance(payload, dict):
                    raise ProtocolError(
                        ErrorCode.INVALID_MESSAGE,
                        'the payload must be a JSON object, such as {"prompt": "..."}',
                    )
                request = parse_agent_request(payload)
                if isinstance(request, AgentAudioRequest):
                    heard = await self._transcribed(request, deadline)
                    took_ms = round((time.perf_counter() - received) * 1000, 1)
                    yield _dump(Transcript(request_id=request_id, t_ms=took_ms, text=heard))
                    request = request.asking(heard)
                if len(request.prompt) > limits.max_prompt_chars:
                    raise ProtocolError(
                        ErrorCode.TEXT_TOO_LONG,
                        f"the prompt has {len(request.prompt)} characters; at most "
                        f"{limits.max_prompt_chars} are accepted",
                    )
                if session_id is not None and len(session_id) > MAX_SESSION_ID_CHARS:
                    raise ProtocolError(
                        ErrorCode.INVALID_MESSAGE,
                        f"{SESSION_HEADER} must hold at most {MAX_SESSION_ID_CHARS} characters",
                    )
            except ProtocolError as error:
                for event in _refusal(error.code, error.message):
                    yield event
                return
            messages, turn = None, None
            if session_id:
                heard = request.interrupted
                messages, turn = await self.conversations.begin(
                    session_id,
                    request_id,
                    request.prompt,
                    interrupted_id=heard.request_id if heard else None,
                    heard_ms=heard.heard_ms if heard else None,
                )
            answer = run(
                request,
                self.llm,
                self.settings.speech_url,
                speech_api_key=self.settings.speech_api_key,
                request_id=request_id,
                schedule=self.settings.schedule,
                limits=limits,
                deadline=deadline,
                messages=messages,
                turn=turn,
            )
            try:
                async with contextlib.aclosing(answer):
                    async for event in answer:
                        yield event
            finally:
                if session_id and turn is not None:
                    self.conversations.finish(session_id, turn)
        finally:
            self.release()

    async def _transcribed(self, request: AgentAudioRequest, deadline: float) -> str:
        """The words of a spoken question, heard before the answer's deadline (`deadline`,
        on the event loop's clock): transcription is part of the answer's time."""
        try:
            async with asyncio.timeout_at(deadline):
                return await self.recognizer.transcribe_async(request)
        except TimeoutError:
            raise ProtocolError(
                ErrorCode.ANSWER_TIMEOUT,
                f"the answer took longer than {self.settings.limits.answer_timeout_s:g} s "
                "and was stopped",
            ) from None


def _dump(event: Any) -> dict[str, Any]:
    return event.model_dump(mode="json", exclude_none=True)


KEEPALIVE = b": keep-alive\n\n"
"""An SSE comment: clients ignore it, proxies see bytes flowing and keep the stream open."""


class EventStream(BoundedStreamingResponse):
    """Events as Server-Sent Events (`data: {json}`, one per event), with a keep-alive
    comment after `keepalive_s` without one; dropped (its events' generator closed, and with
    it the answer) when the caller hangs up or one send waits `send_timeout_s`."""

    stalled_what = "an answer"

    def __init__(
        self, events: AsyncGenerator[dict[str, Any], None], keepalive_s: float, send_timeout_s: float
    ) -> None:
        super().__init__(
            _encoded(events, keepalive_s), send_timeout_s,
            media_type="text/event-stream", headers={"Cache-Control": "no-cache"},
        )


async def _encoded(
    events: AsyncGenerator[dict[str, Any], None], keepalive_s: float
) -> AsyncGenerator[bytes, None]:
    """The encoded events; the next one is awaited in its own task, so that a keep-alive
    can go out meanwhile without cancelling (and so ending) the generator."""
    async with contextlib.aclosing(ticking(events, keepalive_s)) as ticked:
        async for event in ticked:
            yield KEEPALIVE if isinstance(event, Tick) else encode_sse(event)


class DrainingPing:
    """`GET /ping` answers 503 `{"status":"draining"}` once the agent drains for shutdown, so
    that a load balancer stops sending it answers; otherwise AgentCore's own `/ping` answers."""

    def __init__(self, app: Any, service: AgentService) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.service.draining and scope["type"] == "http" and scope["path"] == "/ping":
            await JSONResponse({"status": "draining"}, status_code=503)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def create_app(
    settings: AgentSettings | None = None, *, llm: Model | None = None
) -> BedrockAgentCoreApp:
    """The AgentCore app; `settings` default to `AgentSettings.from_env()`, `llm` to the
    model they name. The LLM is made once, here; the local weights load in a thread as the
    app starts. The app's `state.service` is its `AgentService`."""
    settings = settings or AgentSettings.from_env()
    speech_transport(settings.speech_url)  # a malformed address fails here, not per answer
    service = AgentService(settings, llm or settings.create_model())

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        service.warm_up()
        yield

    app = BedrockAgentCoreApp(lifespan=lifespan)
    app.state.service = service
    app.router.routes.extend(
        [*page_routes(AGENT_PAGE), voices_route(settings.speech_url, settings.speech_api_key)]
    )
    app.add_middleware(BodyLimit, max_bytes=settings.limits.max_body_bytes)
    protect(app, AccessPolicy(settings.api_key, settings.cors_origins, settings.allowed_hosts))
    app.add_middleware(DrainingPing, service=service)

    async def realtime(websocket: WebSocket) -> None:
        await serve_realtime(websocket, service)

    app.router.routes.append(WebSocketRoute("/v1/realtime", realtime))

    @app.websocket
    async def agentcore_realtime(websocket: WebSocket, _context: RequestContext) -> None:
        await serve_realtime(websocket, service)  # AgentCore's /ws: the same socket

    @app.entrypoint
    async def invocations(payload: Any, context: RequestContext) -> EventStream:
        session_id = context.session_id or None  # AgentCore's session header, when sent
        limits = settings.limits
        return EventStream(
            service.answer(payload, session_id), limits.keepalive_s, limits.answer_timeout_s
        )

    return app


def serve_agent(
    host: str = "127.0.0.1",
    port: int = DEFAULT_AGENT_PORT,
    settings: AgentSettings | None = None,
    grace_s: float = DEFAULT_GRACE_S,
) -> None:
    """Run the agent with uvicorn until SIGTERM or Ctrl-C (what `voicestream agent` calls),
    then drain: new answers are refused with `busy`, answers under way get `grace_s` to
    end. Each connection's kernel send buffer is fixed, as the speech server's is
    (`limits.SEND_BUFFER_BYTES`), so that a Realtime or SSE client that stops reading is
    noticed at the send timeout, not after megabytes of autotuned buffer. Logging is set up
    by the caller (`voicestream.logs`)."""
    app = create_app(settings)
    service: AgentService = app.state.service
    config = uvicorn.Config(
        app, host=host, port=port, access_log=False, log_config=None, **CONNECTION_PROTOCOLS
    )
    DrainingServer(
        config, drain=lambda: service.drain(grace_s), send_buffer_bytes=SEND_BUFFER_BYTES
    ).run()


@contextlib.contextmanager
def running_agent(
    app: BedrockAgentCoreApp, host: str = "127.0.0.1", port: int | None = None
) -> Iterator[str]:
    """Serve `app` on `host` in a background thread; yields its base URL, stops on exit
    (tests, benchmarks, the one-machine demo)."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port or free_port(host),
        log_level="warning",
        lifespan="on",
        **CONNECTION_PROTOCOLS,
    )
    with serving(config, "agent-server", SEND_BUFFER_BYTES) as url:
        yield url
