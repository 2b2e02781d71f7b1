"""The speech server's Starlette app: the SageMaker container contract of PROTOCOL.md §1.

It also serves the speech playground page at ``GET /`` (``voicestream.web``).

The socket opens before the model is ready so that ``/ping`` can answer 503 while the
weights load and warm up; requests that arrive meanwhile wait for readiness. On SIGTERM the
runner calls :meth:`ServerState.drain` before uvicorn shuts down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from voicestream.access import AccessPolicy, accepted_subprotocol, protect
from voicestream.edge.drain import Drain, DrainWatch
from voicestream.engine import KokoroEngine
from voicestream.engine.memory import IdleRelease
from voicestream.protocol import ErrorCode, ErrorFrame
from voicestream.server.faces import dictionaries as dictionary_routes
from voicestream.server.faces.captioned import captioned_speech
from voicestream.server.faces.cartesia import tts_bytes, tts_sse, tts_websocket
from voicestream.server.faces.deepgram import speak, speak_websocket
from voicestream.server.faces.discovery import list_models, list_openai_voices, list_voices
from voicestream.server.faces.elevenlabs import multi_stream_input, stream_input
from voicestream.server.faces.elevenlabs_http import (
    speech,
    speech_stream,
    speech_stream_with_timestamps,
    speech_with_timestamps,
)
from voicestream.server.faces.http import invocations, openai_speech
from voicestream.server.faces.session import serve_session
from voicestream.server.faces.wyoming import serve_wyoming
from voicestream.server.streaming import error_response
from voicestream.speech.core import SpeechCore
from voicestream.speech.metrics import CONTENT_TYPE, ServerMetrics
from voicestream.speech.settings import ServerSettings, read_lexicons
from voicestream.web import PLAYGROUND_PAGE, page_routes

log = logging.getLogger(__name__)


def _elevenlabs_routes() -> list[Route | WebSocketRoute]:
    """ElevenLabs' speech API (``voicestream.server.faces.elevenlabs``) and its pronunciation
    dictionaries (``voicestream.server.faces.dictionaries``)."""
    base = "/v1/text-to-speech/{voice_id}"
    dictionaries = "/v1/pronunciation-dictionaries"
    return [
        Route(f"{dictionaries}/add-from-file", _needs_service(dictionary_routes.elevenlabs_add_from_file), methods=["POST"]),
        Route(f"{dictionaries}/add-from-rules", _needs_service(dictionary_routes.elevenlabs_add_from_rules), methods=["POST"]),
        Route(f"{dictionaries}/", _needs_service(dictionary_routes.elevenlabs_list), methods=["GET"]),
        Route(dictionaries, _needs_service(dictionary_routes.elevenlabs_list), methods=["GET"]),
        Route(f"{dictionaries}/{{dictionary_id}}/", _needs_service(dictionary_routes.elevenlabs_get), methods=["GET"]),
        Route(f"{dictionaries}/{{dictionary_id}}", _needs_service(dictionary_routes.elevenlabs_get), methods=["GET"]),
        Route(base, _needs_service(speech), methods=["POST"]),
        Route(f"{base}/stream", _needs_service(speech_stream), methods=["POST"]),
        Route(f"{base}/with-timestamps", _needs_service(speech_with_timestamps), methods=["POST"]),
        Route(f"{base}/stream/with-timestamps", _needs_service(speech_stream_with_timestamps), methods=["POST"]),
        WebSocketRoute(f"{base}/multi-stream-input", multi_stream_input),
        WebSocketRoute(f"{base}/stream-input", stream_input),
    ]


class ServerState:
    """The service once the model is ready; until then, an event to wait on."""

    def __init__(self, settings: ServerSettings, metrics: ServerMetrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self.ready = asyncio.Event()
        self.service: SpeechCore | None = None
        self.failure: str | None = None
        self.draining = False
        self.edge = Drain()
        """The drain's waits; the app's `DrainWatch` wakes them."""

    async def wait(self) -> SpeechCore | None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.settings.ready_timeout_s):
                await self.ready.wait()
        return self.service

    async def drain(self) -> None:
        """SIGTERM (`voicestream.edge.drain`): refuse new sessions and requests, let accepted ones
        finish within ``grace_s``; a session with nothing left to send goes away (1001) at
        once. Then cut: the sessions left close with 1001, every unfinished request fails
        ``busy`` (a session's or an SSE stream's error frame), and an HTTP stream still being
        sent ends without its last chunk."""
        self.draining = True
        service = self.service
        if service is None:
            return
        service.draining = True
        log.info("draining: finishing %d requests on %d sessions within %g s",
                 service.scheduler.depth, len(service.connections), self.settings.grace_s)
        await self.edge.run(
            self.settings.grace_s, service.connections, lambda: service.drained, end=service.scheduler.stop
        )


async def ping(request: Request) -> Response:
    """200 only while the server can take work: the model is loaded, every scheduler
    worker runs, and no shutdown is under way."""
    state: ServerState = request.app.state.server
    if state.draining:
        return JSONResponse({"status": "draining"}, status_code=503)
    if state.service is None:
        return JSONResponse({"status": "loading" if state.failure is None else "failed"}, status_code=503)
    if not state.service.scheduler.healthy:
        return JSONResponse({"status": "unhealthy"}, status_code=503)
    return JSONResponse({"status": "Healthy"})


async def metrics(request: Request) -> Response:
    return Response(request.app.state.server.metrics.render(), media_type=CONTENT_TYPE)


def _needs_service(handler):
    async def endpoint(request: Request) -> Response:
        service = await request.app.state.server.wait()
        if service is None:
            return error_response(ErrorCode.BUSY, "The model is not loaded yet; try again shortly.", 503)
        request.app.state.service = service
        return await handler(request)

    return endpoint


async def bidirectional_stream(websocket: WebSocket) -> None:
    """Accept at once (SageMaker expects the upgrade well inside 250 ms), then wait for the model."""
    await websocket.accept(subprotocol=accepted_subprotocol(websocket.scope))
    service = await websocket.app.state.server.wait()
    if service is None:
        frame = ErrorFrame(code=ErrorCode.BUSY, message="The model is not loaded yet; try again shortly.")
        await websocket.send_text(frame.to_json())
        await websocket.close(code=1013)
        return
    await serve_session(websocket, service)


def create_app(settings: ServerSettings | None = None, engine: KokoroEngine | None = None) -> Starlette:
    """The app; pass ``engine`` to share an already loaded model (tests, benchmarks)."""
    settings = settings or ServerSettings()
    state = ServerState(settings, ServerMetrics())

    async def load() -> None:
        try:
            loaded = engine or await asyncio.to_thread(
                KokoroEngine.load, settings.model_dir, settings.device, settings.variant, pauses=settings.pauses,
                first_window_s=settings.first_window_s,
                idle_release=IdleRelease(settings.release_after_s, settings.renew_above),
                lexicon=read_lexicons(settings.lexicons),
            )
        except Exception as error:
            state.failure = str(error)
            log.exception("The model failed to load")
            state.ready.set()  # waiting requests are refused at once, not after ready_timeout_s
            return
        state.service = SpeechCore(loaded, settings, state.metrics, state.edge.changed)
        state.service.scheduler.start()
        state.ready.set()
        log.info("Kokoro-82M ready on %s", ", ".join(loaded.providers))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        loader = asyncio.create_task(load())
        wyoming = settings.wyoming_port and await serve_wyoming(
            settings.host, settings.wyoming_port, state.wait, settings.max_body_bytes, settings.send_buffer_bytes
        )
        yield
        loader.cancel()
        if wyoming:
            wyoming.close()
        if state.service is not None:
            await state.service.scheduler.stop()

    app = Starlette(
        routes=[
            Route("/ping", ping, methods=["GET"]),
            Route("/invocations", _needs_service(invocations), methods=["POST"]),
            Route("/v1/audio/speech", _needs_service(openai_speech), methods=["POST"]),
            Route("/dev/captioned_speech", _needs_service(captioned_speech), methods=["POST"]),
            Route("/voices", _needs_service(list_voices), methods=["GET"]),
            Route("/v1/audio/voices", _needs_service(list_openai_voices), methods=["GET"]),
            Route("/v1/models", list_models, methods=["GET"]),
            Route("/tts/bytes", _needs_service(tts_bytes), methods=["POST"]),
            Route("/pronunciation-dicts/", _needs_service(dictionary_routes.cartesia_create), methods=["POST"]),
            Route("/pronunciation-dicts/", _needs_service(dictionary_routes.cartesia_list), methods=["GET"]),
            Route("/pronunciation-dicts/{dictionary_id}", _needs_service(dictionary_routes.cartesia_get), methods=["GET"]),
            Route("/pronunciation-dicts/{dictionary_id}", _needs_service(dictionary_routes.cartesia_delete),
                  methods=["DELETE"]),
            Route("/dev/phonemize", _needs_service(dictionary_routes.phonemize), methods=["POST"]),
            Route("/dev/generate_from_phonemes", _needs_service(dictionary_routes.generate_from_phonemes),
                  methods=["POST"]),
            Route("/tts/sse", _needs_service(tts_sse), methods=["POST"]),
            Route("/v1/speak", _needs_service(speak), methods=["POST"]),
            WebSocketRoute("/v1/speak", speak_websocket),
            *_elevenlabs_routes(),
            Route("/metrics", metrics, methods=["GET"]),
            WebSocketRoute("/invocations-bidirectional-stream", bidirectional_stream),
            WebSocketRoute("/tts/websocket", tts_websocket),
            *page_routes(PLAYGROUND_PAGE),
        ],
        lifespan=lifespan,
    )
    app.state.server = state
    app.add_middleware(DrainWatch, drain=state.edge)
    protect(app, AccessPolicy(settings.api_key, settings.cors_origins, settings.allowed_hosts))
    return app
