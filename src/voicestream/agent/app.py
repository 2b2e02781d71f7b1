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
speech server's voice list (`GET /voices`, fetched from it), and the OpenAI Realtime API
(`WS /v1/realtime`, and AgentCore's `WS /ws`), and phone calls from Twilio, Telnyx, Plivo
and Vonage (`/telephony/CARRIER` and its `/stream`, `voicestream.agent.telephony`). Every route acts on one `AgentService`
(`voicestream.agent.service`), which answers. Request bodies are capped (`BodyLimit`)
before the framework reads them.

The same app runs on AgentCore (in the container of docker/agent.Dockerfile, port 8080), and
on one machine (`voicestream agent`, `serve_agent`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit

import uvicorn
from bedrock_agentcore.runtime import BedrockAgentCoreApp, RequestContext
from starlette.responses import JSONResponse
from starlette.routing import WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strands.models import Model

from voicestream.access import AccessPolicy, protect
from voicestream.agent.body_limit import BodyLimit
from voicestream.agent.realtime import serve_realtime
from voicestream.agent.runtime import speech_transport
from voicestream.agent.service import AgentService
from voicestream.agent.settings import AgentSettings
from voicestream.agent.telephony.routes import PREFIX as TELEPHONY_PREFIX
from voicestream.agent.telephony.routes import telephony_routes
from voicestream.agent.ticking import Tick, ticking
from voicestream.agent.voices import voices_route
from voicestream.asgi import (
    CONNECTION_PROTOCOLS,
    BoundedStreamingResponse,
    free_port,
    serving,
)
from voicestream.edge.drain import DrainingServer, DrainWatch
from voicestream.limits import SEND_BUFFER_BYTES
from voicestream.protocol import encode_sse
from voicestream.web import AGENT_PAGE, page_routes

DEFAULT_GRACE_S = 30.0
DEFAULT_AGENT_PORT = 8081
"""On one machine; in its container the agent listens on 8080, as AgentCore expects."""


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
    public = urlsplit(settings.telephony.public_url or "").hostname
    hosts = (*settings.allowed_hosts, *([public] if public else []))
    protect(app, AccessPolicy(settings.api_key, settings.cors_origins, hosts, signed_prefixes=(TELEPHONY_PREFIX,)))
    app.add_middleware(DrainingPing, service=service)
    app.add_middleware(DrainWatch, drain=service.edge)

    async def realtime(websocket: WebSocket) -> None:
        await serve_realtime(websocket, service)

    app.router.routes.append(WebSocketRoute("/v1/realtime", realtime))
    app.router.routes.extend(telephony_routes(service))

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
        config, drain=lambda: service.drain(grace_s), grace_s=grace_s,
        send_buffer_bytes=SEND_BUFFER_BYTES,
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
