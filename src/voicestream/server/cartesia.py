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
from starlette.websockets import WebSocket

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
    SpeechFault,
    load_json_object,
    voice_language,
)
from voicestream.server.connection import (
    Connection,
    Transport,
    WebSocketTransport,
    busy,
)
from voicestream.server.http import audio_body, error_response, read_body, stream_response
from voicestream.server.job import Listener
from voicestream.server.requests import (
    AudioStream,
    SpeechService,
    http_status,
)
from voicestream.server.streamed import Output, Spoken, StreamedSpeech, Voice, start_job
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
        self.speaking = False
        """An answer of this context is being sent (or waits for room in the outbox)."""
        self.task = asyncio.create_task(self._send(), name=f"cartesia-context-{self.id}")

    @property
    def has_unsent(self) -> bool:
        """Text or audio of this context is still to send; an open context waiting for more
        text has nothing (the socket may then go idle, or away while draining)."""
        speech = self.speech
        return self.speaking or speech.unspoken_chars > 0 or (speech.ended and not speech.cancelled)

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
                self.speaking = True
                try:
                    if isinstance(item, Spoken):
                        await self._send_audio(item.stream)
                    else:
                        await self.socket.emit({"type": "flush_done", "context_id": self.id, "done": False,
                                                "flush_done": True, "flush_id": item, "status_code": 206})
                finally:
                    self.speaking = False
            if not self.speech.cancelled:
                await self.socket.emit({"type": "done", "context_id": self.id, "done": True, "status_code": 200})
        except SpeechFault as refused:  # a failure was logged where it happened
            self.speech.cancel()
            refused.request_id = self.id
            self.socket.report(refused)
        except Exception:  # the context fails, the socket goes on
            log.exception("a Cartesia context failed", extra={"request_id": self.id})
            self.speech.cancel()
            self.socket.report(SpeechFault(ErrorCode.INTERNAL, "Synthesis failed for this context.", self.id))
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


class CartesiaSocket(Connection):
    """``WS /tts/websocket``: many contexts at once, each answered as its audio renders."""

    kind = "Cartesia socket"

    def __init__(self, transport: Transport, service: SpeechService, listener: Listener) -> None:
        super().__init__(transport, service, listener)
        self.contexts: dict[str, _Context] = {}

    @property
    def has_unsent(self) -> bool:
        return any(context.has_unsent for context in self.contexts.values())

    @classmethod
    def fault_frame(cls, fault: SpeechFault) -> dict[str, Any]:
        return _error(fault.code, fault.message, fault.request_id)

    async def emit(self, answer: dict[str, Any]) -> None:
        """Queue an answer; wait while the socket is behind (until the send timeout closes a
        client that does not read)."""
        self.queue(answer)
        await self.wait_for_room(MAX_QUEUED_MESSAGES)

    async def release(self) -> None:
        contexts = list(self.contexts.values())
        for context in contexts:
            context.speech.cancel()
            context.task.cancel()
        await asyncio.gather(*(context.task for context in contexts), return_exceptions=True)
        self.contexts.clear()

    async def handle(self, payload: str | bytes) -> None:
        """One client message: a cancel, or text for a context (opened by its first message)."""
        context_id: str | None = None
        try:
            message = load_json_object(payload)
            context_id = message.get("context_id") if isinstance(message.get("context_id"), str) else None
            if message.get("cancel") is True:
                self._cancel(context_id)
            else:
                self._take(parse_request(message))
        except SpeechFault as fault:
            fault.request_id = context_id
            raise
        self.accepted()

    def _take(self, request: CartesiaRequest) -> None:
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

    def _open(self, request: CartesiaRequest) -> _Context:
        limit = self.service.settings.max_session_requests
        if len(self.contexts) >= limit:
            raise busy(f"This socket already has {limit} open contexts; finish one first.")
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
    """``WS /tts/websocket``: accepted at once, served once the model is ready (or refused:
    see `Connection.serve`)."""
    await websocket.accept()
    service: SpeechService | None = await websocket.app.state.server.wait()
    await CartesiaSocket.serve(WebSocketTransport(websocket), service)


async def tts_bytes(request: Request) -> Response:
    """``POST /tts/bytes``: the whole transcript, its audio streamed as it renders. The
    encoder is built before the request is queued (one that cannot start is refused with
    nothing queued), and the response owns the request from birth (`http.JobResponse`)."""
    service: SpeechService = request.app.state.service
    try:
        body = parse_request(load_json_object(await read_body(request, service.settings.max_body_bytes)), CONTAINERS)
        if not body.transcript.strip():
            raise ProtocolError(ErrorCode.TEXT_REQUIRED, "transcript is required and must not be blank")
        job = start_job(service, body.transcript, body.voice, body.output.output(), Listener(), "tts-bytes", ROUTE)
    except SpeechFault as fault:
        service.metrics.errors.labels(code=fault.code.value).inc()
        return error_response(fault.code, fault.message, fault.http_status)
    stream = service.stream(job, ROUTE)
    return stream_response(service, stream, audio_body(stream), stream.encoder.content_type)

