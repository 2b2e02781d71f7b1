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

import base64
import contextlib
import logging
from dataclasses import dataclass
from enum import Enum

from starlette.websockets import WebSocket

from voicestream.audio import create_encoder
from voicestream.edge.connection import POLICY, WebSocketTransport
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
from voicestream.server import contexts as ctx
from voicestream.server.contexts import ContextConnection
from voicestream.speech.core import Output, SpeechCore, Voice

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

    def voice_at(self, speed: float, dictionaries: tuple[str, ...] = ()) -> Voice:
        return Voice(self.voice, speed, self.language, dictionaries)

    def audio(self) -> Output:
        return output_of(self.output, word_timestamps=True)


def output_of(fmt: OutputFormat, word_timestamps: bool) -> Output:
    """The core's `Output` for an ``output_format`` (an encoder of its own for a chosen bit rate)."""
    bit_rate = fmt.bit_rate
    encoder = bit_rate and (lambda: create_encoder(fmt.format, fmt.sample_rate, bitrate=bit_rate))
    return Output(fmt.format, fmt.sample_rate, encoder or None, word_timestamps)


def audio_answer(audio: ctx.Audio, context_id: str | None) -> AudioAnswer:
    """One piece of audio and the characters it speaks, timed from its own start."""
    times = char_alignment(audio.words, audio.start_s, audio.start_s + audio.seconds)
    alignment = SocketAlignment.of(times) if times.chars else None
    return AudioAnswer(context_id=context_id, audio=base64.b64encode(audio.data).decode("ascii"),
                       alignment=alignment, normalized_alignment=alignment)


class _State(Enum):
    OPEN = "open"
    """Taking text."""
    ENDED = "ended"
    """Ended after a flush: its audio is still being sent, and it takes no more text."""


@dataclass
class _Context:
    answer_id: str | None
    state: _State = _State.OPEN
    end_flushed: bool = False
    """The last message was a flush without text: a ``close_context`` now ends the answer."""


class ElevenLabsMachine:
    """Either ElevenLabs socket's protocol without I/O (``options.multi``): contexts answered as
    their audio renders (see `voicestream.server.contexts`)."""

    kind = "ElevenLabs socket"
    route = ROUTE
    unit = "context"

    def __init__(self, options: SocketOptions) -> None:
        self.options = options
        self.contexts: dict[str, _Context] = {}
        self.input_ended = False
        """``stream-input``: the end of the input was sent."""

    def start(self) -> list[ctx.Command]:
        return []

    @staticmethod
    def fault_frame(fault: SpeechFault) -> str:
        return ErrorAnswer(context_id=fault.request_id, error=fault.code.value, message=fault.message).to_json()

    def receive(self, payload: str | bytes) -> list[ctx.Command]:
        context_id: str | None = None
        try:
            raw = load_json_object(payload)
            context_id = raw.get("context_id") if isinstance(raw.get("context_id"), str) else None
            message = parse_socket_message(raw)
            if message.close_socket:
                return [ctx.Finish()]
            return self._multi(message) if self.options.multi else self._single(message)
        except SpeechFault as fault:
            fault.request_id = context_id if self.options.multi else None
            raise

    def _multi(self, message: SocketMessage) -> list[ctx.Command]:
        context_id = message.context_id
        context = self.contexts.get(context_id) if context_id is not None else None
        if message.close_context:
            # one already final raced its isFinal: no error
            return [] if context is None or context_id is None else self._close(context_id, context)
        if message.text == "" and not message.flush:
            return []  # a keep-alive
        if context_id is None:
            raise ProtocolError(ErrorCode.INVALID_MESSAGE, "context_id is required: a non-empty string")
        if context is None:
            if message.text is None:
                raise ProtocolError(ErrorCode.INVALID_MESSAGE, f"no open context {context_id!r}", context_id)
            return [self._open(context_id, message), *self._take(context_id, message)]
        return self._take(context_id, message)

    def _single(self, message: SocketMessage) -> list[ctx.Command]:
        commands: list[ctx.Command] = []
        if SINGLE not in self.contexts:
            if self.input_ended:
                raise ProtocolError(ErrorCode.INVALID_MESSAGE, "the input has ended")
            commands.append(self._open(SINGLE, message))
        if message.text == "" and not message.flush:
            self.contexts[SINGLE].state = _State.ENDED
            self.input_ended = True
            return [*commands, ctx.End(SINGLE)]
        return [*commands, *self._take(SINGLE, message)]

    def _open(self, context_id: str, message: SocketMessage) -> ctx.Open:
        options = self.options
        answer_id = context_id if options.multi else None
        self.contexts[context_id] = _Context(answer_id)
        return ctx.Open(context_id, options.voice_at(message.speed, message.dictionaries), options.audio(),
                    0 if options.auto_mode else UNDECIDED_DELAY_S, context_id or ROUTE, answer_id)

    def _take(self, context_id: str, message: SocketMessage) -> list[ctx.Command]:
        context = self.contexts[context_id]
        if context.state is _State.ENDED:
            raise ProtocolError(ErrorCode.INVALID_MESSAGE, f"context {context_id!r} was closed; use a new context_id",
                                context_id)
        text = message.text or ""
        commands: list[ctx.Command] = [ctx.Feed(context_id, text)]
        if text.strip():
            context.end_flushed = False
        if message.flush:
            commands.append(ctx.Flush(context_id))
            context.end_flushed = not text.strip()
        return commands

    def _close(self, context_id: str, context: _Context) -> list[ctx.Command]:
        """End the answer after its audio, or (a barge-in) stop it now; see the module's docstring."""
        if context.end_flushed and context.state is _State.OPEN:
            context.state = _State.ENDED
            return [ctx.End(context_id)]
        del self.contexts[context_id]
        return [ctx.Cancel(context_id), ctx.Send(FinalAnswer(context_id=context.answer_id).to_json())]

    def event(self, event: ctx.Event) -> list[ctx.Command]:
        context = self.contexts.get(event.context)
        if context is None:
            raise ValueError(f"an event of a context the ElevenLabs face does not hold: {event}")
        match event:
            case ctx.Audio():
                return [ctx.Send(audio_answer(event, context.answer_id).to_json())] if event.data else []
            case ctx.Ended(context_id, completed):
                del self.contexts[context_id]
                final = [ctx.Send(FinalAnswer(context_id=context.answer_id).to_json())] if completed else []
                return final if self.options.multi else [*final, ctx.Finish()]
            case ctx.Refused(context_id):
                del self.contexts[context_id]
                return []
            case ctx.Marked() | ctx.Failed():
                return []


async def _serve(websocket: WebSocket, multi: bool) -> None:
    """Accept, check the URL (a bad one gets its error and a 1008 close), then serve."""
    await websocket.accept()
    service: SpeechCore | None = await websocket.app.state.server.wait()
    try:
        options = SocketOptions.of(websocket, multi)
        if service is not None:
            service.check_voice(options.voice, 1.0, options.language)
    except SpeechFault as fault:
        if service is not None:
            service.metrics.errors.labels(code=fault.code.value).inc()
        with contextlib.suppress(Exception):
            await websocket.send_text(ElevenLabsMachine.fault_frame(fault))
            await websocket.close(POLICY)
        return
    await ContextConnection.serve_face(WebSocketTransport(websocket), service, ElevenLabsMachine(options))


async def multi_stream_input(websocket: WebSocket) -> None:
    """``WS /v1/text-to-speech/{voice_id}/multi-stream-input``."""
    await _serve(websocket, multi=True)


async def stream_input(websocket: WebSocket) -> None:
    """``WS /v1/text-to-speech/{voice_id}/stream-input``."""
    await _serve(websocket, multi=False)
