"""Deepgram's speech API over the same core: ``WS /v1/speak`` and ``POST /v1/speak``.

pipecat's ``DeepgramTTSService(base_url=...)`` / ``DeepgramHttpTTSService`` and LiveKit's
``deepgram.TTS(base_url=...)`` speak through voicestream unchanged. The socket carries one
stream of text: ``Speak`` messages feed the server's chunker (LiveKit sends one per word;
the chunker decides where to cut, so the first words are spoken soon), ``Flush`` speaks
what is left and is answered ``Flushed`` after that audio, ``Clear`` drops everything not
yet sent at once (barge-in) and is answered ``Cleared``, ``Close`` speaks what is left and
closes (1000) once it is sent. Audio goes out as binary frames; a bad message is answered
with a ``Warning`` and the socket goes on.

The query picks the voice and the audio (`parse_speak_query`); a query that cannot be
served is refused at the handshake with 400 and the reason in ``dg-error``, as Deepgram does.
"""

from __future__ import annotations

import logging
import uuid

from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from voicestream.audio import ENGINE_SAMPLE_RATE, create_encoder
from voicestream.audio.alaw import AlawEncoder
from voicestream.edge.connection import WebSocketTransport
from voicestream.protocol import ErrorCode, ProtocolError, SpeechFault, load_json_object
from voicestream.protocol.deepgram import (
    Cleared,
    Flushed,
    Metadata,
    RestError,
    Speak,
    SpeakOptions,
    SpeakWarning,
    kokoro_voice,
    parse_body,
    parse_socket_message,
    parse_speak_query,
)
from voicestream.server import contexts as ctx
from voicestream.server.contexts import ContextConnection
from voicestream.server.streaming import audio_body, read_body, start_stream, stream_response
from voicestream.speech.core import Output, SpeechCore, Voice

log = logging.getLogger(__name__)

ROUTE = "deepgram"
BUFFER_DELAY_S = 3.0
"""How long text the chunker cannot decide yet waits for more before it is spoken as it is."""
MODEL_VERSION = "kokoro-82m-v1.0"


def _voice(options: SpeakOptions) -> Voice:
    return Voice(kokoro_voice(options.model), options.speed, None)


def _output(options: SpeakOptions) -> Output:
    """The audio ``options`` ask for: one of the server's formats, A-law's encoder of its own,
    or a compressed format at the asked ``bit_rate``."""
    rate, fmt, bit_rate = options.rate, options.format, options.bit_rate
    if fmt is None:
        return Output("pcm16", rate, lambda: AlawEncoder(rate, ENGINE_SAMPLE_RATE))
    if bit_rate is not None and fmt in ("mp3", "opus", "aac"):
        return Output(fmt, rate, lambda: create_encoder(fmt, rate, bitrate=bit_rate))
    return Output(fmt, rate)


def _error_response(fault: SpeechFault, request_id: str) -> Response:
    """Deepgram's error body, and its reason in ``dg-error`` (what pipecat shows)."""
    body = RestError(err_code=fault.code.value, err_msg=fault.message, request_id=request_id)
    return Response(body.to_json(), fault.http_status, {"dg-error": fault.message}, "application/json")


class DeepgramMachine:
    """``WS /v1/speak``'s protocol without I/O: one stream of text in, its audio out as binary
    frames (see `voicestream.server.contexts`). The text since the socket opened or since the
    last Clear is one utterance, a context of the runner, opened by the first message that
    needs one."""

    kind = "Deepgram socket"
    route = ROUTE
    unit = "context"

    def __init__(self, options: SpeakOptions, request_id: str) -> None:
        self.options = options
        self.request_id = request_id
        self.voice = _voice(options)
        self.output = _output(options)
        self.flushes = 0
        self.closing = False
        """Close was received: the rest is spoken, then the socket closes."""
        self.count = 0
        self.utterance: str | None = None
        """The open utterance's context, if any."""

    def start(self) -> list[ctx.Command]:
        options = self.options
        return [ctx.Send(Metadata(
            request_id=self.request_id, model_name=options.model, model_version=MODEL_VERSION,
            model_uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"voicestream:{self.voice.voice}")),
        ).to_json())]

    @staticmethod
    def fault_frame(fault: SpeechFault) -> str:
        return SpeakWarning(warn_code=fault.code.value, warn_msg=fault.message, description=fault.message).to_json()

    def receive(self, payload: str | bytes) -> list[ctx.Command]:
        message = parse_socket_message(load_json_object(payload))
        if self.closing:
            raise ProtocolError(ErrorCode.INVALID_MESSAGE, f"{message.type} after Close: the socket is closing")
        if message.type == "Clear":
            cleared = [] if self.utterance is None else [ctx.Cancel(self.utterance)]
            self.utterance = None
            return [*cleared, ctx.Send(Cleared(sequence_id=self.flushes).to_json())]
        if message.type == "Close":
            self.closing = True
            return [ctx.Finish()] if self.utterance is None else [ctx.End(self.utterance)]
        commands = self._open() if self.utterance is None else []
        utterance = self.utterance
        assert utterance is not None
        if isinstance(message, Speak):
            return [*commands, ctx.Feed(utterance, message.text)]
        self.flushes += 1
        return [*commands, ctx.Flush(utterance, self.flushes - 1)]

    def _open(self) -> list[ctx.Command]:
        self.count += 1
        self.utterance = str(self.count)
        return [ctx.Open(self.utterance, self.voice, self.output, BUFFER_DELAY_S, f"{self.request_id}:{self.count}", None)]

    def event(self, event: ctx.Event) -> list[ctx.Command]:
        match event:
            case ctx.Audio(_, data):
                return [ctx.Send(data)] if data else []
            case ctx.Marked(_, mark):
                return [ctx.Send(Flushed(sequence_id=mark).to_json())]
            case ctx.Ended(utterance) | ctx.Refused(utterance):
                if utterance != self.utterance:
                    raise ValueError(f"an event of an utterance the Deepgram face does not hold: {event}")
                self.utterance = None  # a failed or refused one: the text that follows starts afresh
                return [ctx.Finish()] if self.closing and isinstance(event, ctx.Ended) else []
            case ctx.Failed():
                return []


async def speak_websocket(websocket: WebSocket) -> None:
    """``WS /v1/speak``: the query is checked before the handshake is answered, and refused
    with 400 and ``dg-error`` as Deepgram does. The voice is checked too once the model is
    ready; while it loads the socket is accepted at once (a client's connect timeout is
    shorter than a load) and served when it is ready, a voice the engine lacks then
    answered with a ``Warning`` per ``Speak``."""
    service: SpeechCore | None = websocket.app.state.server.service
    try:
        options = parse_speak_query(websocket.query_params, socket=True)
        if service is not None:
            service.check_voice(kokoro_voice(options.model), options.speed)
    except SpeechFault as fault:
        if service is not None:
            service.metrics.errors.labels(code=fault.code.value).inc()
        await websocket.send_denial_response(_error_response(fault, str(uuid.uuid4())))
        return
    await websocket.accept()
    service = service or await websocket.app.state.server.wait()
    await ContextConnection.serve_face(
        WebSocketTransport(websocket), service, DeepgramMachine(options, str(uuid.uuid4())),
    )


async def speak(request: Request) -> Response:
    """``POST /v1/speak``: ``{"text"}``, its audio streamed as it renders (owned from birth,
    as ``/tts/bytes``)."""
    service: SpeechCore = request.app.state.service
    request_id = str(uuid.uuid4())
    try:
        options = parse_speak_query(request.query_params, socket=False)
        body = parse_body(load_json_object(await read_body(request, service.settings.max_body_bytes)))
        stream = start_stream(service, body.text, _voice(options), _output(options), request_id, ROUTE)
    except SpeechFault as fault:
        service.metrics.errors.labels(code=fault.code.value).inc()
        return _error_response(fault, request_id)
    headers = {"dg-request-id": request_id, "dg-model-name": options.model, "dg-char-count": str(len(body.text))}
    return stream_response(service, stream, audio_body(stream), stream.encoder.content_type, **headers)
