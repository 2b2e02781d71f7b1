"""Cartesia's speech API over the same core: ``WS /tts/websocket``, ``POST /tts/bytes`` and
``POST /tts/sse``.

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

The official ``cartesia`` SDK works unchanged too: its WebSocket helpers (contexts pushed
to, ``no_more_inputs()``, ``cancel()``, a voice given as a bare id, its default output
``pcm_f32le`` at 44100 Hz) and ``tts.generate_sse``, whose events (``chunk``,
``timestamps``, ``done``, or an ``error`` in place of the rest) carry the socket's shapes.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence

from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from voicestream.audio import ENGINE_SAMPLE_RATE, Float32Encoder, create_encoder
from voicestream.engine.alignment import WordTiming, offset_words
from voicestream.protocol import ErrorCode, ProtocolError, SpeechFault, load_json_object
from voicestream.protocol.cartesia import (
    BYTES_CONTAINERS,
    RAW_ENCODINGS,
    SOCKET_CONTAINERS,
    CartesiaAnswer,
    CartesiaChunk,
    CartesiaDone,
    CartesiaError,
    CartesiaFlushDone,
    CartesiaGeneration,
    CartesiaStreamError,
    CartesiaTimestamps,
    CartesiaWordTimestamps,
    parse_generation,
)
from voicestream.server.connection import (
    ContextSocket,
    WebSocketTransport,
    busy,
)
from voicestream.server.http import audio_body, error_response, read_body, stream_response
from voicestream.server.job import Listener
from voicestream.server.requests import AudioStream, SpeechService, SynthesisFailed
from voicestream.server.streamed import Output, Spoken, StreamedSpeech, Voice, start_job
from voicestream.text import STREAMED

log = logging.getLogger(__name__)

ROUTE = "cartesia"
LATENCY_SCHEDULE = STREAMED
"""A streamed context's chunks: the server's one schedule of streamed text."""


def _voice(request: CartesiaGeneration) -> Voice:
    return Voice(request.voice_id, request.speed, request.language_override)


def _output(request: CartesiaGeneration) -> Output:
    """The audio ``request`` asks for, as the core's `Output` (an encoder of this route's own
    where the session protocol has no format: ``pcm_f32le``, mp3 at a chosen bit rate)."""
    fmt, timed = request.output_format, request.add_timestamps
    rate = fmt.sample_rate
    if fmt.container == "mp3":
        bit_rate = fmt.bit_rate
        return Output("mp3", rate, bit_rate and (lambda: create_encoder("mp3", rate, bitrate=bit_rate)), timed)
    if fmt.encoding == "pcm_f32le":
        return Output("pcm16", rate, lambda: Float32Encoder(rate, ENGINE_SAMPLE_RATE), timed)
    return Output("wav" if fmt.container == "wav" else str(RAW_ENCODINGS[fmt.encoding]), rate, None, timed)


def _timestamps(context_id: str | None, words: Sequence[WordTiming]) -> CartesiaTimestamps:
    return CartesiaTimestamps(context_id=context_id, word_timestamps=CartesiaWordTimestamps(
        words=[w.word for w in words],
        start=[round(w.start_s, 3) for w in words],
        end=[round(w.end_s, 3) for w in words],
    ))


def _chunk(context_id: str | None, data: bytes, started: float) -> CartesiaChunk:
    return CartesiaChunk(
        context_id=context_id, data=base64.b64encode(data).decode("ascii"),
        step_time=round((time.monotonic() - started) * 1000, 1),
    )


class _Context:
    """One Cartesia context: its streamed speech and the task that sends its answers."""

    def __init__(self, socket: CartesiaSocket, request: CartesiaGeneration) -> None:
        assert request.context_id is not None
        self.id = request.context_id
        self.socket = socket
        self.add_timestamps = request.add_timestamps
        self.spoken_s = 0.0
        """Audio of this context sent so far: Cartesia's word times count from its start."""
        self.speech = StreamedSpeech(
            socket.service, _voice(request), _output(request), socket.listener, ROUTE, self.id,
            LATENCY_SCHEDULE, request.max_buffer_delay_ms / 1000,
        )
        self.flushes = 0
        self.task = asyncio.create_task(self._send(), name=f"cartesia-context-{self.id}")

    @property
    def has_unsent(self) -> bool:
        """Text or audio of this context is still to send; an open context waiting for more
        text has nothing (the socket may then go idle, or away while draining)."""
        return self.speech.has_unsent

    def take(self, request: CartesiaGeneration) -> None:
        """One more message of this context: its text, then a flush or the end."""
        self.speech.feed(request.transcript)
        if request.flush or (request.max_buffer_delay_ms == 0 and request.transcript.strip()):
            self.speech.flush()
            self.flushes += 1
            self.speech.mark(self.flushes)
        if not request.continue_:
            self.speech.end()

    async def _send(self) -> None:
        try:
            async for item in self.speech:
                if isinstance(item, Spoken):
                    await self._send_audio(item.stream)
                else:
                    await self.socket.emit(CartesiaFlushDone(context_id=self.id, flush_id=item))
            if not self.speech.cancelled:
                await self.socket.emit(CartesiaDone(context_id=self.id))
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
                    await self.socket.emit(_timestamps(self.id, offset_words(chunk.words, self.spoken_s)))
                if chunk.data:
                    await self.socket.emit(_chunk(self.id, chunk.data, started))
        self.spoken_s += stream.job.audio_seconds


class CartesiaSocket(ContextSocket[_Context]):
    """``WS /tts/websocket``: many contexts at once, each answered as its audio renders."""

    kind = "Cartesia socket"

    @classmethod
    def fault_frame(cls, fault: SpeechFault) -> str:
        return CartesiaError(
            context_id=fault.request_id, status_code=fault.http_status, code=fault.code.value, error=fault.message,
        ).to_json()

    async def handle(self, payload: str | bytes) -> None:
        """One client message: a cancel, or text for a context (opened by its first message)."""
        context_id: str | None = None
        try:
            message = load_json_object(payload)
            context_id = message.get("context_id") if isinstance(message.get("context_id"), str) else None
            if message.get("cancel") is True:
                self._cancel(context_id)
            else:
                self._take(parse_generation(message))
        except SpeechFault as fault:
            fault.request_id = context_id
            raise
        self.accepted()

    def _take(self, request: CartesiaGeneration) -> None:
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

    def _open(self, request: CartesiaGeneration) -> _Context:
        limit = self.service.settings.max_session_requests
        if len(self.contexts) >= limit:
            raise busy(f"This socket already has {limit} open contexts; finish one first.")
        if request.flush and not request.transcript.strip():
            raise ProtocolError(ErrorCode.INVALID_MESSAGE, f"no open context {request.context_id!r} to flush", request.context_id)
        self.service.check_voice(request.voice_id, request.speed, request.language_override)
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


def _start(service: SpeechService, request: CartesiaGeneration, route: str) -> AudioStream:
    """Queue a whole-transcript request (``/tts/bytes``, ``/tts/sse``); the encoder is built
    before it is queued (one that cannot start is refused with nothing queued). The caller
    hands the stream to a response at once, which owns the request from birth."""
    if not request.transcript.strip():
        raise ProtocolError(ErrorCode.TEXT_REQUIRED, "transcript is required and must not be blank")
    job = start_job(service, request.transcript, _voice(request), _output(request), Listener(), route, ROUTE)
    return service.stream(job, ROUTE)


async def _read_generation(request: Request, service: SpeechService, containers: tuple[str, ...]) -> CartesiaGeneration:
    return parse_generation(load_json_object(await read_body(request, service.settings.max_body_bytes)), containers)


def _refused(service: SpeechService, fault: SpeechFault) -> Response:
    service.metrics.errors.labels(code=fault.code.value).inc()
    return error_response(fault.code, fault.message, fault.http_status)


async def tts_bytes(request: Request) -> Response:
    """``POST /tts/bytes``: the whole transcript, its audio streamed as it renders."""
    service: SpeechService = request.app.state.service
    try:
        stream = _start(service, await _read_generation(request, service, BYTES_CONTAINERS), "tts-bytes")
    except SpeechFault as fault:
        return _refused(service, fault)
    return stream_response(service, stream, audio_body(stream), stream.encoder.content_type)


async def tts_sse(request: Request) -> Response:
    """``POST /tts/sse``: the whole transcript, its audio as ``chunk`` events as it renders
    (raw audio only, as Cartesia's), each piece's words first as a ``timestamps`` event
    when asked, then ``done``; a failure after the headers ends it with an ``error`` event."""
    service: SpeechService = request.app.state.service
    try:
        body = await _read_generation(request, service, SOCKET_CONTAINERS)
        stream = _start(service, body, body.context_id or "tts-sse")
    except SpeechFault as fault:
        return _refused(service, fault)
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return stream_response(service, stream, _sse_events(stream, body), "text/event-stream", **headers)


def _event(answer: CartesiaAnswer) -> bytes:
    return f"event: {answer.type}\ndata: {answer.to_json()}\n\n".encode()


async def _sse_events(stream: AudioStream, request: CartesiaGeneration) -> AsyncIterator[bytes]:
    context_id, started = request.context_id, time.monotonic()
    try:
        async with contextlib.aclosing(stream.chunks()) as chunks:
            async for chunk in chunks:
                if chunk.words and request.add_timestamps:
                    yield _event(_timestamps(context_id, chunk.words))
                if chunk.data:
                    yield _event(_chunk(context_id, chunk.data, started))
        if stream.result is not None:
            yield _event(CartesiaDone(context_id=context_id))
    except SynthesisFailed as failure:
        yield _event(CartesiaStreamError(
            context_id=context_id, status_code=failure.http_status, title="Synthesis failed",
            message=failure.message, error_code=failure.code.value, request_id=stream.job.request_id,
        ))
