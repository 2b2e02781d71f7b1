"""ElevenLabs' speech sockets over the same core: ``WS /v1/text-to-speech/{voice_id}/multi-stream-input``
and ``WS /v1/text-to-speech/{voice_id}/stream-input``.

pipecat's ``ElevenLabsTTSService(url=...)`` and LiveKit's ``elevenlabs.TTS(base_url=...)`` open
``multi-stream-input`` and speak through voicestream unchanged; their source set the shapes:

- the URL names the voice (a Kokoro voice or blend) and ``output_format`` (``pcm_24000``,
  ``mp3_22050_32``...); ``auto_mode=true`` speaks each text message at once (both clients
  then send whole sentences), otherwise the server's chunker cuts the text and what it cannot
  decide yet waits at most ``UNDECIDED_DELAY_S``; ``language_code`` overrides the voice's
  language; ``model_id``, ``inactivity_timeout`` (the server's ``--idle-timeout`` applies),
  ``sync_alignment``, ``enable_logging``, ``enable_ssml_parsing`` and
  ``apply_text_normalization`` are accepted and ignored;
- a context opens with its first text (``{"text": " ", "context_id", "voice_settings"}``;
  only ``voice_settings.speed`` is used); ``{"text": ""}`` is a keep-alive and opens nothing;
  ``{"context_id", "flush": true}`` speaks what the chunker holds;
- ``close_context`` right after a flush without text of its own (what pipecat and LiveKit send
  at the end of an answer) ends the context: its audio is all sent, then ``isFinal``. Any other
  ``close_context`` (text came since, or the context was already ending) is a barge-in: its
  jobs are cancelled in the core at once and ``isFinal`` answers at once; one for a context
  already final is no error;
- ``{"close_socket": true}`` closes the socket (1000) once what is already queued is sent;
- every audio answer carries the characters it speaks, timed from the start of that answer's
  audio (``alignment`` and ``normalizedAlignment``, from the core's word times), as pipecat reads
  them; errors are ``{"error": code, "message", "contextId"}``, which LiveKit raises.

``stream-input`` is the one-context form (ElevenLabs' realtime SDK): the same text messages
without ``context_id``, ``{"text": ""}`` ending the input; after the last audio comes
``isFinal`` and the socket closes.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from dataclasses import dataclass

from starlette.websockets import WebSocket

from voicestream.audio import create_encoder
from voicestream.protocol import ErrorCode, ProtocolError, SpeechFault, load_json_object
from voicestream.protocol.elevenlabs import (
    DEFAULT_OUTPUT_FORMAT,
    AudioAnswer,
    ErrorAnswer,
    FinalAnswer,
    OutputFormat,
    SocketAlignment,
    SocketMessage,
    char_alignment,
    parse_output_format,
    parse_socket_message,
    spoken_language,
)
from voicestream.server.connection import (
    POLICY,
    ContextSocket,
    WebSocketTransport,
    busy,
)
from voicestream.server.job import Listener, RenderedChunk
from voicestream.server.requests import AudioStream, SpeechService
from voicestream.server.streamed import Output, Spoken, StreamedSpeech, Voice
from voicestream.text import STREAMED

log = logging.getLogger(__name__)

ROUTE = "elevenlabs"
UNDECIDED_DELAY_S = 1.0
"""Without ``auto_mode``: how long text the chunker cannot cut yet waits for more, or a flush."""
SINGLE = ""
"""The one context of ``stream-input`` (its answers carry no ``contextId``)."""


@dataclass(frozen=True)
class SocketOptions:
    """What the socket's URL asks for, the same for all its contexts."""

    voice: str
    output: OutputFormat
    language: str | None
    auto_mode: bool
    multi: bool

    @classmethod
    def of(cls, websocket: WebSocket, multi: bool) -> SocketOptions:
        query, voice = websocket.query_params, websocket.path_params["voice_id"]
        auto_mode = query.get("auto_mode", "false").lower()
        if auto_mode not in ("true", "false"):
            raise ProtocolError(ErrorCode.INVALID_MESSAGE, "auto_mode must be true or false")
        return cls(voice, parse_output_format(query.get("output_format", DEFAULT_OUTPUT_FORMAT)),
                   spoken_language(query.get("language_code"), voice), auto_mode == "true", multi)

    def voice_at(self, speed: float) -> Voice:
        return Voice(self.voice, speed, self.language)

    def audio(self) -> Output:
        return output_of(self.output, word_timestamps=True)


def output_of(fmt: OutputFormat, word_timestamps: bool) -> Output:
    """The core's `Output` for an ``output_format`` (an encoder of its own for a chosen bit rate)."""
    bit_rate = fmt.bit_rate
    encoder = bit_rate and (lambda: create_encoder(fmt.format, fmt.sample_rate, bitrate=bit_rate))
    return Output(fmt.format, fmt.sample_rate, encoder or None, word_timestamps)


class _Transport(WebSocketTransport):
    """The socket with what its URL asked for."""

    def __init__(self, websocket: WebSocket, options: SocketOptions) -> None:
        super().__init__(websocket)
        self.options = options


def audio_answer(chunk: RenderedChunk, start_s: float, context_id: str | None) -> AudioAnswer:
    """One piece of audio and the characters it speaks, timed from its own start."""
    times = char_alignment(chunk.words, start_s, start_s + chunk.seconds)
    alignment = SocketAlignment.of(times) if times.chars else None
    return AudioAnswer(context_id=context_id, audio=base64.b64encode(chunk.data).decode("ascii"),
                       alignment=alignment, normalized_alignment=alignment)


class _Context:
    """One context: its streamed speech and the task that sends its answers."""

    def __init__(self, socket: ElevenLabsSocket, context_id: str, speed: float) -> None:
        options = socket.options
        self.id = context_id
        self.socket = socket
        self.answer_id = context_id if options.multi else None
        self.speech = StreamedSpeech(
            socket.service, options.voice_at(speed), options.audio(), socket.listener, ROUTE, context_id or ROUTE,
            STREAMED, 0 if options.auto_mode else UNDECIDED_DELAY_S,
        )
        self.end_flushed = False
        """The last message was a flush without text: a ``close_context`` now ends the answer."""
        self.final = False
        """``isFinal`` is queued or sent."""
        self.task = asyncio.create_task(self._send(), name=f"elevenlabs-context-{context_id}")

    @property
    def has_unsent(self) -> bool:
        return self.speech.has_unsent

    def take(self, message: SocketMessage) -> None:
        if self.speech.ended:
            raise ProtocolError(ErrorCode.INVALID_MESSAGE, f"context {self.id!r} was closed; use a new context_id", self.id)
        text = message.text or ""
        self.speech.feed(text)
        if text.strip():
            self.end_flushed = False
        if message.flush:
            self.speech.flush()
            self.end_flushed = not text.strip()

    def close(self) -> None:
        """End the answer after its audio, or (a barge-in) stop it now; see the module's docstring."""
        if self.end_flushed and not self.speech.ended:
            self.speech.end()
            return
        self.socket.contexts.pop(self.id, None)
        if self.speech.cancel():
            self.socket.service.metrics.cancels.labels(route=ROUTE).inc()
        if not self.final:
            self.final = True
            self.socket.queue(FinalAnswer(context_id=self.answer_id).to_json())

    async def _send(self) -> None:
        try:
            async for item in self.speech:
                if isinstance(item, Spoken):
                    await self._send_audio(item.stream)
            if not self.speech.cancelled and not self.final:
                self.final = True
                await self.socket.emit(FinalAnswer(context_id=self.answer_id))
        except SpeechFault as refused:  # a failure was logged where it happened
            self.speech.cancel()
            refused.request_id = self.answer_id
            self.socket.report(refused)
        except Exception:  # the context fails, the socket goes on
            log.exception("an ElevenLabs context failed", extra={"request_id": self.id})
            self.speech.cancel()
            self.socket.report(SpeechFault(ErrorCode.INTERNAL, "Synthesis failed for this context.", self.answer_id))
        finally:
            if self.socket.contexts.get(self.id) is self:
                del self.socket.contexts[self.id]
            if not self.socket.options.multi:
                self.socket.finish()

    async def _send_audio(self, stream: AudioStream) -> None:
        start_s = 0.0
        async with contextlib.aclosing(stream.chunks()) as chunks:
            async for chunk in chunks:
                if self.speech.cancelled:
                    return
                if chunk.data:
                    await self.socket.emit(audio_answer(chunk, start_s, self.answer_id))
                start_s += chunk.seconds


class ElevenLabsSocket(ContextSocket[_Context]):
    """Either ElevenLabs socket (``options.multi``): contexts answered as their audio renders."""

    kind = "ElevenLabs socket"

    def __init__(self, transport: _Transport, service: SpeechService, listener: Listener) -> None:
        super().__init__(transport, service, listener)
        self.options = transport.options
        self.input_ended = False
        """``stream-input``: the end of the input was sent."""

    @classmethod
    def fault_frame(cls, fault: SpeechFault) -> str:
        return ErrorAnswer(context_id=fault.request_id, error=fault.code.value, message=fault.message).to_json()

    async def handle(self, payload: str | bytes) -> None:
        context_id: str | None = None
        try:
            raw = load_json_object(payload)
            context_id = raw.get("context_id") if isinstance(raw.get("context_id"), str) else None
            message = parse_socket_message(raw)
            if message.close_socket:
                self.finish()
            elif self.options.multi:
                self._multi(message)
            else:
                self._single(message)
        except SpeechFault as fault:
            fault.request_id = context_id if self.options.multi else None
            raise
        self.accepted()

    def _multi(self, message: SocketMessage) -> None:
        context_id = message.context_id
        context = self.contexts.get(context_id) if context_id is not None else None
        if message.close_context:
            if context is not None:  # one already final raced its isFinal: no error
                context.close()
            return
        if message.text == "" and not message.flush:
            return  # a keep-alive
        if context_id is None:
            raise ProtocolError(ErrorCode.INVALID_MESSAGE, "context_id is required: a non-empty string")
        if context is None:
            if message.text is None:
                raise ProtocolError(ErrorCode.INVALID_MESSAGE, f"no open context {context_id!r}", context_id)
            context = self._open(context_id, message)
        context.take(message)

    def _single(self, message: SocketMessage) -> None:
        context = self.contexts.get(SINGLE)
        if context is None:
            if self.input_ended:
                raise ProtocolError(ErrorCode.INVALID_MESSAGE, "the input has ended")
            context = self._open(SINGLE, message)
        if message.text == "" and not message.flush:
            context.speech.end()
            self.input_ended = True
            return
        context.take(message)

    def _open(self, context_id: str, message: SocketMessage) -> _Context:
        limit = self.service.settings.max_session_requests
        if len(self.contexts) >= limit:
            raise busy(f"This socket already has {limit} open contexts; close one first.")
        self.service.check_voice(self.options.voice, message.speed, self.options.language)
        context = _Context(self, context_id, message.speed)
        self.contexts[context_id] = context
        return context


async def _serve(websocket: WebSocket, multi: bool) -> None:
    """Accept, check the URL (a bad one gets its error and a 1008 close), then serve."""
    await websocket.accept()
    service: SpeechService | None = await websocket.app.state.server.wait()
    try:
        options = SocketOptions.of(websocket, multi)
        if service is not None:
            service.check_voice(options.voice, 1.0, options.language)
    except SpeechFault as fault:
        if service is not None:
            service.metrics.errors.labels(code=fault.code.value).inc()
        with contextlib.suppress(Exception):
            await websocket.send_text(ElevenLabsSocket.fault_frame(fault))
            await websocket.close(POLICY)
        return
    await ElevenLabsSocket.serve(_Transport(websocket, options), service)


async def multi_stream_input(websocket: WebSocket) -> None:
    """``WS /v1/text-to-speech/{voice_id}/multi-stream-input``."""
    await _serve(websocket, multi=True)


async def stream_input(websocket: WebSocket) -> None:
    """``WS /v1/text-to-speech/{voice_id}/stream-input``."""
    await _serve(websocket, multi=False)
