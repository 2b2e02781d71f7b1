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

import base64
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from enum import Enum

from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from voicestream.audio import ENGINE_SAMPLE_RATE, Float32Encoder, create_encoder
from voicestream.edge.connection import WebSocketTransport
from voicestream.engine.alignment import TimedWord
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
from voicestream.server import contexts as ctx
from voicestream.server import streaming
from voicestream.server.contexts import ContextConnection
from voicestream.speech.core import AudioStream, Output, SpeechCore, SynthesisFailed, Voice
from voicestream.speech.job import RenderedChunk

log = logging.getLogger(__name__)

ROUTE = "cartesia"


def _voice(request: CartesiaGeneration) -> Voice:
    dictionaries = (request.pronunciation_dict_id,) if request.pronunciation_dict_id else ()
    return Voice(request.voice_id, request.speed, request.language_override, dictionaries)


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


def _timestamps(context_id: str | None, words: Sequence[TimedWord]) -> CartesiaTimestamps:
    return CartesiaTimestamps(context_id=context_id, word_timestamps=CartesiaWordTimestamps(
        words=[w.word for w in words],
        start=[round(w.start_s, 3) for w in words],
        end=[round(w.end_s, 3) for w in words],
    ))


def _chunk(context_id: str | None, data: bytes, elapsed_s: float) -> CartesiaChunk:
    return CartesiaChunk(
        context_id=context_id, data=base64.b64encode(data).decode("ascii"), step_time=round(elapsed_s * 1000, 1),
    )


class _State(Enum):
    OPEN = "open"
    """Taking text."""
    ENDED = "ended"
    """``continue: false`` came: its audio is still being sent, and it takes no more text."""


@dataclass
class _Context:
    add_timestamps: bool
    state: _State = _State.OPEN
    flushes: int = 0


class CartesiaMachine:
    """``WS /tts/websocket``'s protocol without I/O: many contexts at once, each answered as its
    audio renders (see `voicestream.server.contexts`)."""

    kind = "Cartesia socket"
    route = ROUTE
    unit = "context"

    def __init__(self) -> None:
        self.contexts: dict[str, _Context] = {}

    def start(self) -> list[ctx.Command]:
        return []

    @staticmethod
    def fault_frame(fault: SpeechFault) -> str:
        return CartesiaError(
            context_id=fault.request_id, status_code=fault.http_status, code=fault.code.value, error=fault.message,
        ).to_json()

    def receive(self, payload: str | bytes) -> list[ctx.Command]:
        """One client message: a cancel, or text for a context (opened by its first message)."""
        context_id: str | None = None
        try:
            message = load_json_object(payload)
            context_id = message.get("context_id") if isinstance(message.get("context_id"), str) else None
            if message.get("cancel") is True:
                return self._cancel(context_id)
            return self._take(parse_generation(message))
        except SpeechFault as fault:
            fault.request_id = context_id
            raise

    def _take(self, request: CartesiaGeneration) -> list[ctx.Command]:
        context_id = request.context_id
        if context_id is None:
            raise ProtocolError(ErrorCode.INVALID_MESSAGE, "context_id is required: a non-empty string")
        commands: list[ctx.Command] = []
        context = self.contexts.get(context_id)
        if context is None:
            if request.flush and not request.transcript.strip():
                raise ProtocolError(ErrorCode.INVALID_MESSAGE, f"no open context {context_id!r} to flush", context_id)
            commands.append(ctx.Open(context_id, _voice(request), _output(request), request.max_buffer_delay_ms / 1000,
                                 context_id, context_id))
            context = self.contexts[context_id] = _Context(request.add_timestamps)
        elif context.state is _State.ENDED:
            raise ProtocolError(
                ErrorCode.INVALID_MESSAGE, f"context {context_id!r} was ended (continue: false); use a new context_id",
                context_id,
            )
        commands.append(ctx.Feed(context_id, request.transcript))
        if request.flush or (request.max_buffer_delay_ms == 0 and request.transcript.strip()):
            context.flushes += 1
            commands.append(ctx.Flush(context_id, context.flushes))
        if not request.continue_:
            context.state = _State.ENDED
            commands.append(ctx.End(context_id))
        return commands

    def _cancel(self, context_id: str | None) -> list[ctx.Command]:
        """Drop a context at once, with no answer (a cancel that races its ``done`` is no error)."""
        if context_id is None or self.contexts.pop(context_id, None) is None:
            return []
        return [ctx.Cancel(context_id)]

    def event(self, event: ctx.Event) -> list[ctx.Command]:
        context = self.contexts.get(event.context)
        if context is None:
            raise ValueError(f"an event of a context the Cartesia face does not hold: {event}")
        match event:
            case ctx.Audio(context_id, data, _, _, words, elapsed_s):
                frames: list[ctx.Command] = []
                if words and context.add_timestamps:
                    frames.append(ctx.Send(_timestamps(context_id, words).to_json()))
                if data:
                    frames.append(ctx.Send(_chunk(context_id, data, elapsed_s).to_json()))
                return frames
            case ctx.Marked(context_id, mark):
                return [ctx.Send(CartesiaFlushDone(context_id=context_id, flush_id=mark).to_json())]
            case ctx.Ended(context_id, completed):
                del self.contexts[context_id]
                return [ctx.Send(CartesiaDone(context_id=context_id).to_json())] if completed else []
            case ctx.Refused(context_id):
                del self.contexts[context_id]
                return []
            case ctx.Failed():
                return []


async def tts_websocket(websocket: WebSocket) -> None:
    """``WS /tts/websocket``: accepted at once, served once the model is ready (or refused:
    see `Connection.serve`)."""
    await websocket.accept()
    service: SpeechCore | None = await websocket.app.state.server.wait()
    await ContextConnection.serve_face(WebSocketTransport(websocket), service, CartesiaMachine())


def _start(service: SpeechCore, request: CartesiaGeneration, request_id: str) -> AudioStream:
    """Queue a whole-transcript request (``/tts/bytes``, ``/tts/sse``); the encoder is built
    before it is queued (one that cannot start is refused with nothing queued). The caller
    hands the stream to a response at once, which owns the request from birth."""
    if not request.transcript.strip():
        raise ProtocolError(ErrorCode.TEXT_REQUIRED, "transcript is required and must not be blank")
    return streaming.start_stream(service, request.transcript, _voice(request), _output(request), request_id, ROUTE)


async def _read_generation(request: Request, service: SpeechCore, containers: tuple[str, ...]) -> CartesiaGeneration:
    return parse_generation(load_json_object(await streaming.read_body(request, service.settings.max_body_bytes)), containers)


async def tts_bytes(request: Request) -> Response:
    """``POST /tts/bytes``: the whole transcript, its audio streamed as it renders."""
    service: SpeechCore = request.app.state.service
    try:
        stream = _start(service, await _read_generation(request, service, BYTES_CONTAINERS), "tts-bytes")
    except SpeechFault as fault:
        return streaming.fault_response(service, fault)
    return streaming.stream_response(service, stream, streaming.audio_body(stream), stream.encoder.content_type)


async def tts_sse(request: Request) -> Response:
    """``POST /tts/sse``: the whole transcript, its audio as ``chunk`` events as it renders
    (raw audio only, as Cartesia's), each piece's words first as a ``timestamps`` event
    when asked, then ``done``; a failure after the headers ends it with an ``error`` event."""
    service: SpeechCore = request.app.state.service
    try:
        body = await _read_generation(request, service, SOCKET_CONTAINERS)
        stream = _start(service, body, body.context_id or "tts-sse")
    except SpeechFault as fault:
        return streaming.fault_response(service, fault)
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return streaming.stream_response(service, stream, _sse_events(stream, body), "text/event-stream", **headers)


def _event(answer: CartesiaAnswer) -> bytes:
    return f"event: {answer.type}\ndata: {answer.to_json()}\n\n".encode()


def _sse_events(stream: AudioStream, request: CartesiaGeneration) -> AsyncIterator[bytes]:
    context_id, started = request.context_id, time.monotonic()

    def piece(chunk: RenderedChunk, _start_s: float) -> list[bytes]:
        events = [_event(_timestamps(context_id, chunk.words))] if chunk.words and request.add_timestamps else []
        if chunk.data:
            events.append(_event(_chunk(context_id, chunk.data, time.monotonic() - started)))
        return events

    def failed(failure: SynthesisFailed) -> bytes:
        return _event(CartesiaStreamError(
            context_id=context_id, status_code=failure.http_status, title="Synthesis failed",
            message=failure.message, error_code=failure.code.value, request_id=stream.job.request_id,
        ))

    return streaming.stream_body(stream, piece, lambda _: _event(CartesiaDone(context_id=context_id)), failed)
