"""Cartesia's speech API over the same core: ``WS /tts/websocket`` and ``POST /tts/bytes``.

pipecat's ``CartesiaTTSService(url=...)`` and LiveKit's ``cartesia.TTS(base_url=...)``
speak through voicestream unchanged. Their source, not Cartesia's documentation, set the
shapes where the two differ:

- every answer carries ``context_id`` (pipecat indexes ``msg["context_id"]``); ``chunk``
  answers carry their audio in ``data`` and ``done`` answers ``"done": true`` (LiveKit
  tests those fields, not ``type``); an ``error`` carries no ``done`` field, so that
  LiveKit raises it instead of taking it for the end of the context;
- a context fed with ``continue: true`` ends with ``continue: false``, with or without
  text (pipecat sends ``""``, LiveKit ``" "``), and is answered ``done`` once its audio
  is out; ``{"context_id", "cancel": true}`` drops it at once, with no answer (a cancel
  that races the ``done`` is no error);
- ``max_buffer_delay_ms`` (default 3000, Cartesia's) bounds how long text the chunker cannot
  decide yet waits; 0 speaks each message's text at once (pipecat and LiveKit send 0
  when they cut sentences themselves).

Model ids and ``Cartesia-Version`` are accepted and ignored; voice ids are Kokoro voices
or blends (``af_heart``, ``af_bella+am_adam``). With ``add_timestamps`` the words of each
piece go out as a ``timestamps`` message before the audio they time (seconds from the
start of the context's audio), as the core times them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from voicestream.audio import (
    ENGINE_SAMPLE_RATE,
    SUPPORTED_SAMPLE_RATES,
    Float32Encoder,
    create_encoder,
)
from voicestream.protocol import (
    DEFAULT_VOICE,
    ErrorCode,
    ProtocolError,
    load_json_object,
    voice_language,
)
from voicestream.server.http import _cancel_on_exit, _streaming, error_response, read_body
from voicestream.server.job import Listener
from voicestream.server.requests import (
    AudioStream,
    RequestRejected,
    SpeechService,
    SynthesisFailed,
    http_status,
)
from voicestream.server.streamed import (
    Output,
    Spoken,
    StreamedSpeech,
    Voice,
    admit,
    registered,
    start_job,
)
from voicestream.text import ChunkSchedule

log = logging.getLogger(__name__)

ROUTE = "cartesia"
ENCODINGS = {"pcm_s16le": "pcm16", "pcm_mulaw": "mulaw", "pcm_f32le": None}
"""Cartesia's raw encodings and the protocol format of each (``pcm_f32le`` has none: its
encoder is this route's own)."""
CONTAINERS = ("raw", "wav", "mp3")
"""``/tts/bytes`` containers; the WebSocket sends raw audio only."""
DEFAULT_BUFFER_DELAY_MS = 3000
MAX_BUFFER_DELAY_MS = 5000
LATENCY_SCHEDULE = ChunkSchedule(3, (1, 2))
"""A streamed context's chunks: a short first piece, then one sentence, then two (the
agent's default schedule, see ``voicestream.agent.runtime``)."""
MAX_QUEUED_MESSAGES = 16
"""Answers waiting for the socket beyond which a context waits before sending more."""
MAX_PENDING_ERRORS = 4096
"""Error answers waiting to be sent, beyond which the socket is closed with 1008."""


@dataclass(frozen=True)
class OutputFormat:
    container: str
    encoding: str
    sample_rate: int
    bit_rate: int | None = None

    def output(self) -> Output:
        rate = self.sample_rate
        if self.container == "mp3":
            bit_rate = self.bit_rate
            return Output("mp3", rate, bit_rate and (lambda: create_encoder("mp3", rate, bitrate=bit_rate)))
        if self.encoding == "pcm_f32le":
            return Output("pcm16", rate, lambda: Float32Encoder(rate, ENGINE_SAMPLE_RATE))
        return Output("wav" if self.container == "wav" else ENCODINGS[self.encoding], rate)


@dataclass(frozen=True)
class CartesiaRequest:
    """A generation request (``/tts/bytes``, or one message of a WebSocket context)."""

    transcript: str
    voice: Voice
    output: OutputFormat
    context_id: str | None
    continues: bool
    max_buffer_delay_ms: int
    flush: bool
    add_timestamps: bool = False


def _field[T](message: Mapping[str, Any], name: str, kind: type[T], default: T, context_id: str | None) -> T:
    value = message.get(name)
    if value is None:
        return default
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ProtocolError(ErrorCode.INVALID_MESSAGE, f"{name} must be a {kind.__name__}", context_id)
    return value


def _object(message: Mapping[str, Any], name: str, context_id: str | None) -> Mapping[str, Any]:
    return _field(message, name, dict, {}, context_id)


def _voice(message: Mapping[str, Any], context_id: str | None) -> Voice:
    voice = _object(message, "voice", context_id)
    mode = voice.get("mode", "id")
    if mode != "id" or not isinstance(voice.get("id", DEFAULT_VOICE), str):
        raise ProtocolError(ErrorCode.UNKNOWN_VOICE, 'voice must be {"mode": "id", "id": a Kokoro voice or blend}', context_id)
    name = voice.get("id") or DEFAULT_VOICE
    speed = _object(message, "generation_config", context_id).get("speed", 1.0)
    if isinstance(speed, bool) or not isinstance(speed, (int, float)):
        raise ProtocolError(ErrorCode.INVALID_SPEED, "generation_config.speed must be a number", context_id)
    language = _field(message, "language", str, "", context_id) or None
    if language is not None and language.split("-")[0].lower() == voice_language(name).split("-")[0]:
        language = None  # "en" with a British voice keeps the voice's own English
    return Voice(name, float(speed), language)


def _output(message: Mapping[str, Any], containers: tuple[str, ...], context_id: str | None) -> OutputFormat:
    fmt = _object(message, "output_format", context_id)
    container = fmt.get("container", "raw")
    if container not in containers:
        raise ProtocolError(ErrorCode.UNSUPPORTED_FORMAT, f"output_format.container must be {' or '.join(containers)}", context_id)
    encoding = fmt.get("encoding", "pcm_s16le")
    if (container == "raw" and encoding not in ENCODINGS) or (container == "wav" and encoding != "pcm_s16le"):
        allowed = ", ".join(ENCODINGS) if container == "raw" else "pcm_s16le"
        raise ProtocolError(ErrorCode.UNSUPPORTED_FORMAT, f"output_format.encoding must be {allowed}", context_id)
    rate = fmt.get("sample_rate", ENGINE_SAMPLE_RATE)
    if isinstance(rate, bool) or rate not in SUPPORTED_SAMPLE_RATES:
        rates = ", ".join(map(str, SUPPORTED_SAMPLE_RATES))
        raise ProtocolError(ErrorCode.UNSUPPORTED_SAMPLE_RATE, f"output_format.sample_rate must be {rates} (Hz)", context_id)
    bit_rate = fmt.get("bit_rate") if container == "mp3" else None
    if bit_rate is not None and (isinstance(bit_rate, bool) or not isinstance(bit_rate, int) or bit_rate <= 0):
        raise ProtocolError(ErrorCode.UNSUPPORTED_FORMAT, "output_format.bit_rate must be a positive number of bits per second", context_id)
    return OutputFormat(container, encoding, rate, bit_rate)


def parse_request(message: Mapping[str, Any], containers: tuple[str, ...] = ("raw",)) -> CartesiaRequest:
    """One generation request; raises :class:`ProtocolError` (its ``request_id`` is the context's)."""
    context_id = message.get("context_id")
    context_id = context_id if isinstance(context_id, str) and context_id else None
    delay = _field(message, "max_buffer_delay_ms", int, DEFAULT_BUFFER_DELAY_MS, context_id)
    if not 0 <= delay <= MAX_BUFFER_DELAY_MS:
        raise ProtocolError(ErrorCode.INVALID_MESSAGE, f"max_buffer_delay_ms must be 0 to {MAX_BUFFER_DELAY_MS}", context_id)
    return CartesiaRequest(
        transcript=_field(message, "transcript", str, "", context_id),
        voice=_voice(message, context_id),
        output=_output(message, containers, context_id),
        context_id=context_id,
        continues=_field(message, "continue", bool, False, context_id),
        max_buffer_delay_ms=delay,
        flush=_field(message, "flush", bool, False, context_id),
        add_timestamps=_field(message, "add_timestamps", bool, False, context_id),
    )


def _error(code: ErrorCode | str, message: str, context_id: str | None) -> dict[str, Any]:
    return {"type": "error", "context_id": context_id, "status_code": http_status(ErrorCode(code)),
            "code": str(code), "error": message}


class _Context:
    """One Cartesia context: its streamed speech and the task that sends its answers."""

    def __init__(self, socket: CartesiaSocket, request: CartesiaRequest) -> None:
        assert request.context_id is not None
        self.id = request.context_id
        self.socket = socket
        self.add_timestamps = request.add_timestamps
        self.spoken_s = 0.0
        """Audio of this context sent so far: Cartesia's word times count from its start."""
        output = dataclasses.replace(request.output.output(), word_timestamps=request.add_timestamps)
        self.speech = StreamedSpeech(
            socket.service, request.voice, output, socket.listener, ROUTE, self.id,
            LATENCY_SCHEDULE, request.max_buffer_delay_ms / 1000,
        )
        self.flushes = 0
        self.task = asyncio.create_task(self._send(), name=f"cartesia-context-{self.id}")

    def take(self, request: CartesiaRequest) -> None:
        """One more message of this context: its text, then a flush or the end."""
        self.speech.feed(request.transcript)
        if request.flush or (request.max_buffer_delay_ms == 0 and request.transcript.strip()):
            self.speech.flush()
            self.flushes += 1
            self.speech.mark(self.flushes)
        if not request.continues:
            self.speech.end()

    async def _send(self) -> None:
        try:
            async for item in self.speech:
                if isinstance(item, Spoken):
                    await self._send_audio(item.stream)
                else:
                    await self.socket.emit({"type": "flush_done", "context_id": self.id, "done": False,
                                            "flush_done": True, "flush_id": item, "status_code": 206})
            if not self.speech.cancelled:
                await self.socket.emit({"type": "done", "context_id": self.id, "done": True, "status_code": 200})
        except (RequestRejected, SynthesisFailed) as refused:  # a failure was logged where it happened
            self.speech.cancel()
            self.socket.reject(refused.code, refused.message, self.id)
        except Exception:  # the context fails, the socket goes on
            log.exception("a Cartesia context failed", extra={"request_id": self.id})
            self.speech.cancel()
            self.socket.reject(ErrorCode.INTERNAL, "Synthesis failed for this context.", self.id)
        finally:
            if self.socket.contexts.get(self.id) is self:
                del self.socket.contexts[self.id]

    async def _send_audio(self, stream: AudioStream) -> None:
        started = time.monotonic()
        async with contextlib.aclosing(stream.chunks()) as chunks:
            async for chunk in chunks:
                if self.speech.cancelled:
                    return
                if chunk.words and self.add_timestamps:
                    await self.socket.emit({
                        "type": "timestamps", "context_id": self.id, "done": False, "status_code": 206,
                        "word_timestamps": {
                            "words": [w.word for w in chunk.words],
                            "start": [round(self.spoken_s + w.start_s, 3) for w in chunk.words],
                            "end": [round(self.spoken_s + w.end_s, 3) for w in chunk.words],
                        },
                    })
                if chunk.data:
                    await self._emit_chunk(chunk.data, started)
        self.spoken_s += stream.job.audio_seconds

    async def _emit_chunk(self, data: bytes, started: float) -> None:
        await self.socket.emit({
            "type": "chunk", "context_id": self.id, "data": base64.b64encode(data).decode("ascii"),
            "done": False, "status_code": 206, "step_time": round((time.monotonic() - started) * 1000, 1),
        })


class CartesiaSocket:
    """``WS /tts/websocket``: many contexts at once, each answered as its audio renders."""

    def __init__(self, websocket: WebSocket, service: SpeechService, listener: Listener) -> None:
        self.websocket = websocket
        self.service = service
        self.listener = listener
        """The socket's share of the queue, for all its contexts (they render in arrival order)."""
        self.contexts: dict[str, _Context] = {}
        self._outbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._room = asyncio.Event()
        self._pending_errors = 0
        self._close_now: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    @property
    def idle(self) -> bool:
        """No context has audio left to send (drain waits for this)."""
        return not self.contexts and self._outbox.empty()

    def go_away(self) -> None:
        """Close with 1001 now (the server is shutting down)."""
        self._close_at_once(1001)

    def _close_at_once(self, code: int) -> None:
        if not self._close_now.done():
            self._close_now.set_result(code)

    async def emit(self, answer: dict[str, Any]) -> None:
        """Queue an answer; wait while the socket is behind (the client does not read)."""
        self._outbox.put_nowait(answer)
        while self._outbox.qsize() > MAX_QUEUED_MESSAGES:
            self._room.clear()
            await self._room.wait()

    def reject(self, code: ErrorCode | str, message: str, context_id: str | None) -> None:
        """Answer with an error, never waiting; a client that does not read them is closed (1008)."""
        self.service.metrics.errors.labels(code=str(code)).inc()
        if self._pending_errors >= MAX_PENDING_ERRORS:
            log.warning("closing a Cartesia socket with %d unread errors (1008)", self._pending_errors)
            self._close_at_once(1008)
            return
        self._pending_errors += 1
        self._outbox.put_nowait(_error(code, message, context_id))

    async def run(self) -> None:
        receiver = asyncio.create_task(self._receive_loop(), name="cartesia-receiver")
        sender = asyncio.create_task(self._send_loop(), name="cartesia-sender")
        try:
            done, _ = await asyncio.wait((receiver, sender, self._close_now), return_when=asyncio.FIRST_COMPLETED)
            if self._close_now in done:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(5):
                        await self.websocket.close(code=self._close_now.result())
            for task in done - {self._close_now}:
                error = None if task.cancelled() else task.exception()
                if error is not None and not isinstance(error, WebSocketDisconnect):
                    log.error("the Cartesia socket failed", exc_info=error)
        finally:
            for context in list(self.contexts.values()):
                context.speech.cancel()
                context.task.cancel()
            receiver.cancel()
            sender.cancel()
            await asyncio.gather(receiver, sender, *(c.task for c in self.contexts.values()), return_exceptions=True)
            self.contexts.clear()

    async def _receive_loop(self) -> None:
        idle_timeout_s = self.service.settings.idle_timeout_s
        while True:
            try:
                async with asyncio.timeout(idle_timeout_s):
                    message = await self.websocket.receive()
            except TimeoutError:
                if not self.idle:
                    continue  # quiet, but audio is still going out
                self._close_at_once(1000)
                return
            if message["type"] == "websocket.disconnect":
                raise WebSocketDisconnect(message.get("code", 1000))
            self.handle(message.get("text") if message.get("text") is not None else message.get("bytes") or b"")


    async def _send_loop(self) -> None:
        while True:
            answer = await self._outbox.get()
            self._room.set()
            if answer is None:
                return
            if answer["type"] == "error":
                self._pending_errors -= 1
            await self.websocket.send_json(answer)

    def handle(self, payload: str | bytes) -> None:
        """One client message: a cancel, or text for a context (opened by its first message)."""
        context_id: str | None = None
        try:
            message = load_json_object(payload)
            context_id = message.get("context_id") if isinstance(message.get("context_id"), str) else None
            if message.get("cancel") is True:
                self._cancel(context_id)
                return
            request = parse_request(message)
            if request.context_id is None:
                raise ProtocolError(ErrorCode.INVALID_MESSAGE, "context_id is required: a non-empty string")
            context = self.contexts.get(request.context_id)
            if context is None:
                context = self._open(request)
            elif context.speech.ended:
                raise ProtocolError(
                    ErrorCode.INVALID_MESSAGE,
                    f"context {request.context_id!r} was ended (continue: false); use a new context_id",
                    request.context_id,
                )
            context.take(request)
        except ProtocolError as error:
            self.reject(error.code, error.message, context_id)
        except RequestRejected as rejected:
            self.reject(rejected.code, rejected.message, context_id)

    def _open(self, request: CartesiaRequest) -> _Context:
        limit = self.service.settings.max_session_requests
        if len(self.contexts) >= limit:
            raise RequestRejected(ErrorCode.BUSY, f"This socket already has {limit} open contexts; finish one first.")
        if request.flush and not request.transcript.strip():
            raise ProtocolError(ErrorCode.INVALID_MESSAGE, f"no open context {request.context_id!r} to flush", request.context_id)
        voice = request.voice
        self.service.check("a", voice.voice, voice.speed, voice.language)
        context = _Context(self, request)
        self.contexts[context.id] = context
        return context

    def _cancel(self, context_id: str | None) -> None:
        context = self.contexts.pop(context_id, None) if context_id is not None else None
        if context is not None and context.speech.cancel():
            self.service.metrics.cancels.labels(route=ROUTE).inc()


async def tts_websocket(websocket: WebSocket) -> None:
    """``WS /tts/websocket``: accepted at once, served once the model is ready; before that,
    beyond ``--max-sessions`` or while draining, one ``busy`` error and close."""
    await websocket.accept()
    service: SpeechService | None = await websocket.app.state.server.wait()
    listener = None if service is None else admit(service)
    if service is None or listener is None:
        if service is not None:
            service.metrics.errors.labels(code=ErrorCode.BUSY.value).inc()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5):
                await websocket.send_json(_error(ErrorCode.BUSY, "The server is busy or shutting down; try again shortly.", None))
                await websocket.close(code=1001 if service is not None and service.draining else 1013)
        return
    socket = CartesiaSocket(websocket, service, listener)
    async with registered(service, socket, listener):
        await socket.run()


async def tts_bytes(request: Request) -> Response:
    """``POST /tts/bytes``: the whole transcript, its audio streamed as it renders."""
    service: SpeechService = request.app.state.service
    try:
        body = parse_request(load_json_object(await read_body(request, service.settings.max_body_bytes)), CONTAINERS)
        if not body.transcript.strip():
            raise ProtocolError(ErrorCode.TEXT_REQUIRED, "transcript is required and must not be blank")
        job = start_job(service, body.transcript, body.voice, body.output.output(), Listener(), "tts-bytes", ROUTE)
    except (ProtocolError, RequestRejected) as error:
        service.metrics.errors.labels(code=str(error.code)).inc()
        return error_response(error.code, error.message, http_status(ErrorCode(error.code)))
    stream = service.stream(job, ROUTE)
    return _streaming(service, _cancel_on_exit(stream), stream.encoder.content_type)

