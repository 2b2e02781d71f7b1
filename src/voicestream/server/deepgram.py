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

import asyncio
import contextlib
import logging
import uuid

from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from voicestream.audio import ENGINE_SAMPLE_RATE, create_encoder
from voicestream.audio.alaw import AlawEncoder
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
from voicestream.server.connection import (
    Connection,
    Transport,
    WebSocketTransport,
    release_contexts,
)
from voicestream.server.http import audio_body, read_body, stream_response
from voicestream.server.job import Listener
from voicestream.server.requests import SpeechService
from voicestream.server.streamed import Output, Spoken, StreamedSpeech, Voice, start_job
from voicestream.text import STREAMED

log = logging.getLogger(__name__)

ROUTE = "deepgram"
BUFFER_DELAY_S = 3.0
"""How long text the chunker cannot decide yet waits for more before it is spoken as it is."""
MAX_QUEUED_FRAMES = 16
"""Frames waiting for the socket beyond which the utterance waits before sending more."""
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


class _SpeakTransport(WebSocketTransport):
    """The socket, with the options its handshake asked for."""

    def __init__(self, websocket: WebSocket, options: SpeakOptions) -> None:
        super().__init__(websocket)
        self.options = options


class _Utterance:
    """The text since the socket opened or since the last Clear, and the task that sends its audio."""

    def __init__(self, socket: DeepgramSocket, number: int) -> None:
        self.socket = socket
        self.speech = StreamedSpeech(
            socket.service, socket.voice, socket.output, socket.listener, ROUTE,
            f"{socket.request_id}:{number}", STREAMED, BUFFER_DELAY_S,
        )
        self.task = asyncio.create_task(self._send(), name=f"deepgram-utterance-{number}")

    @property
    def has_unsent(self) -> bool:
        return self.speech.has_unsent

    async def _send(self) -> None:
        try:
            async for item in self.speech:
                if isinstance(item, Spoken):
                    async with contextlib.aclosing(item.stream.chunks()) as chunks:
                        async for chunk in chunks:
                            if chunk.data:
                                await self.socket.emit(self.speech, chunk.data)
                else:
                    await self.socket.emit(self.speech, Flushed(sequence_id=item).to_json())
        except SpeechFault as refused:  # a failure was logged where it happened
            self.socket.failed(self, refused)
        except Exception:  # the utterance fails, the socket goes on
            log.exception("a Deepgram utterance failed")
            self.socket.failed(self, SpeechFault(ErrorCode.INTERNAL, "Synthesis failed; the text so far was dropped."))
        else:
            self.socket.ended(self)


class DeepgramSocket(Connection):
    """``WS /v1/speak``: one stream of text in, its audio out as binary frames."""

    kind = "Deepgram socket"

    def __init__(self, transport: Transport, service: SpeechService, listener: Listener) -> None:
        super().__init__(transport, service, listener)
        assert isinstance(transport, _SpeakTransport)
        options = transport.options
        self.voice = _voice(options)
        self.output = _output(options)
        self.request_id = str(uuid.uuid4())
        self.flushes = 0
        self.closing = False
        """Close was received: the rest is spoken, then the socket closes."""
        self._count = 0
        self._live: set[_Utterance] = set()
        """Utterances whose task still runs (the current one, and cleared ones finishing)."""
        self._answering = False
        self.utterance = self._next_utterance()
        self.queue(Metadata(
            request_id=self.request_id, model_name=options.model, model_version=MODEL_VERSION,
            model_uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"voicestream:{self.voice.voice}")),
        ).to_json())

    @property
    def has_unsent(self) -> bool:
        return self._answering or self.utterance.has_unsent

    @classmethod
    def fault_frame(cls, fault: SpeechFault) -> str:
        return SpeakWarning(warn_code=fault.code.value, warn_msg=fault.message, description=fault.message).to_json()

    async def emit(self, speech: StreamedSpeech, frame: str | bytes) -> None:
        """Queue a frame of ``speech``; wait while the socket is behind. A frame whose speech
        was cleared meanwhile is dropped when its turn comes (`answer`)."""
        self.queue_answer((speech, frame))
        await self.wait_for_room(MAX_QUEUED_FRAMES)

    async def answer(self, item: tuple[StreamedSpeech, str | bytes]) -> None:
        speech, frame = item
        if speech.cancelled:
            return
        self._answering = True
        try:
            await self.send_within(frame)
        finally:
            self._answering = False

    async def handle(self, payload: str | bytes) -> None:
        message = parse_socket_message(load_json_object(payload))
        if self.closing:
            raise ProtocolError(ErrorCode.INVALID_MESSAGE, f"{message.type} after Close: the socket is closing")
        if self.utterance.speech.cancelled:  # it failed (its Warning is on its way): start afresh
            self.utterance = self._next_utterance()
        speech = self.utterance.speech
        if isinstance(message, Speak):
            speech.feed(message.text)
        elif message.type == "Flush":
            speech.flush()
            speech.mark(self.flushes)
            self.flushes += 1
        elif message.type == "Clear":
            if self.utterance.has_unsent:
                self.service.metrics.cancels.labels(route=ROUTE).inc()
            speech.cancel()
            self.queue(Cleared(sequence_id=self.flushes).to_json())
            self.utterance = self._next_utterance()
        else:
            self.closing = True
            speech.end()
        self.accepted()

    def ended(self, utterance: _Utterance) -> None:
        """An utterance's audio is all out: after Close, the socket closes."""
        if self.closing and utterance is self.utterance:
            self.finish()

    def failed(self, utterance: _Utterance, fault: SpeechFault) -> None:
        """An utterance failed: its Warning goes out and the text that follows starts afresh."""
        utterance.speech.cancel()
        self.report(fault)
        if utterance is self.utterance:
            if self.closing:
                self.finish()
            else:
                self.utterance = self._next_utterance()

    async def release(self) -> None:
        await release_contexts(list(self._live))

    def _next_utterance(self) -> _Utterance:
        self._count += 1
        utterance = _Utterance(self, self._count)
        self._live.add(utterance)
        utterance.task.add_done_callback(lambda _: self._live.discard(utterance))
        return utterance


async def speak_websocket(websocket: WebSocket) -> None:
    """``WS /v1/speak``: the query is checked before the handshake is answered, and refused
    with 400 and ``dg-error`` as Deepgram does. The voice is checked too once the model is
    ready; while it loads the socket is accepted at once (a client's connect timeout is
    shorter than a load) and served when it is ready, a voice the engine lacks then
    answered with a ``Warning`` per ``Speak``."""
    service: SpeechService | None = websocket.app.state.server.service
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
    await DeepgramSocket.serve(_SpeakTransport(websocket, options), service)


async def speak(request: Request) -> Response:
    """``POST /v1/speak``: ``{"text"}``, its audio streamed as it renders (owned from birth,
    as ``/tts/bytes``)."""
    service: SpeechService = request.app.state.service
    request_id = str(uuid.uuid4())
    try:
        options = parse_speak_query(request.query_params, socket=False)
        body = parse_body(load_json_object(await read_body(request, service.settings.max_body_bytes)))
        job = start_job(service, body.text, _voice(options), _output(options), Listener(), request_id, ROUTE)
    except SpeechFault as fault:
        service.metrics.errors.labels(code=fault.code.value).inc()
        return _error_response(fault, request_id)
    stream = service.stream(job, ROUTE)
    headers = {"dg-request-id": request_id, "dg-model-name": options.model, "dg-char-count": str(len(body.text))}
    return stream_response(service, stream, audio_body(stream), stream.encoder.content_type, **headers)
