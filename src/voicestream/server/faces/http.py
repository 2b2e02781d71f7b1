"""``POST /invocations`` and the OpenAI-compatible ``POST /v1/audio/speech``.

Both stream audio as it is produced; a client that goes away cancels its request, so the
engine stops at the next piece and nothing is left queued. Each body chunk must leave
within ``send_timeout_s``.

A request is owned from birth: a streamed answer is a :class:`JobResponse`, which ends its
request and closes its listener however it ends, even when its body never started (Python
never runs an async generator's ``finally`` if it is closed before its first step); a
``stream: false`` answer (`answer_whole`, shared with ``/dev/captioned_speech``) holds its
request in ``SpeechCore.request`` for as long as it collects, counted against
``--max-whole-files`` and cancelled when the client hangs up.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from voicestream.asgi import BoundedStreamingResponse
from voicestream.audio import finalize_wav
from voicestream.protocol import (
    AudioEvent,
    ErrorCode,
    ErrorFrame,
    ProtocolError,
    SpeechFault,
    encode_sse,
    fault_frame,
    parse_openai_request,
    parse_post_request,
)
from voicestream.speech.core import (
    AudioStream,
    Output,
    RequestRejected,
    SpeechCore,
    SynthesisFailed,
    Voice,
)
from voicestream.speech.job import Listener

log = logging.getLogger(__name__)


class JobResponse(BoundedStreamingResponse):
    """A streamed answer that owns its request from birth: however the response ends (sent,
    dropped by a client that hung up or took nothing for ``send_timeout_s``, or cancelled
    before its body's first step), its request ends and its listener closes. A response
    that is never called at all closes its listener when it is collected, and the
    scheduler's reaper ends the request."""

    def __init__(self, stream: AudioStream, content: AsyncIterator[bytes], send_timeout_s: float, **kwargs: object) -> None:
        super().__init__(content, send_timeout_s, **kwargs)
        self.job = stream.job
        closing = weakref.finalize(self, stream.job.listener.close)  # holds the listener, not the response
        closing.atexit = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.job.cancel()  # a no-op once its audio is all out
            self.job.listener.close()


def error_response(code: ErrorCode | str, message: str, status: int = 400) -> Response:
    return Response(ErrorFrame(code=str(code), message=message).to_http_json(), status, media_type="application/json")


def fault_response(service: SpeechCore, fault: SpeechFault) -> Response:
    """The HTTP answer to a fault: ``{"error": {code, message}}`` with the code's status, counted."""
    return _rejected(service, fault.code, fault.message, fault.http_status)


def _rejected(service: SpeechCore, code: ErrorCode, message: str, status: int) -> Response:
    service.metrics.errors.labels(code=code.value).inc()
    return error_response(code, message, status)


async def read_body(request: Request, limit: int) -> bytes:
    """The body, read no further than ``limit`` bytes: a larger one is refused before it is
    held in memory (``payload_too_large``)."""
    declared = request.headers.get("content-length", "")
    received = bytearray()
    if not (declared.isdigit() and int(declared) > limit):
        async for chunk in request.stream():
            received += chunk
            if len(received) > limit:
                break
        else:
            return bytes(received)
    raise ProtocolError(ErrorCode.PAYLOAD_TOO_LARGE, f"The request body is larger than {limit} bytes.")


async def audio_body(stream: AudioStream) -> AsyncIterator[bytes]:
    """The audio as a raw body; a failure after the headers ends it short (the log has the cause)."""
    try:
        async for data in stream:
            yield data
    except SynthesisFailed:
        return  # headers are gone; the client sees a short body, the log has the cause


async def _sse_events(stream: AudioStream, request_id: str) -> AsyncIterator[bytes]:
    seq = 0
    try:
        async for data in stream:
            yield encode_sse(AudioEvent.from_audio(seq, data))
            seq += 1
        if stream.result is not None:
            yield encode_sse(stream.result.complete_frame(request_id))
    except SynthesisFailed as failure:
        yield encode_sse(fault_frame(failure, request_id))


async def _openai_sse_events(stream: AudioStream) -> AsyncIterator[bytes]:
    """OpenAI's speech SSE: ``speech.audio.delta`` events with base64 audio, then ``speech.audio.done``."""
    try:
        async for data in stream:
            yield encode_sse({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")})
        if stream.result is not None:
            yield encode_sse({"type": "speech.audio.done", "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}})
    except SynthesisFailed as failure:
        yield encode_sse({"type": "error", "error": {"code": failure.code.value, "message": failure.message}})


def start_stream(
    service: SpeechCore, text: str, voice: Voice, output: Output, request_id: str, route: str
) -> AudioStream:
    """``SpeechCore.start`` on a listener of its own. The caller hands the stream to a
    :class:`JobResponse` (`stream_response`) at once, with nothing awaited in between, so that
    the request is owned from birth."""
    job = service.start(text, voice, output, Listener(), request_id, route)
    return service.stream(job, route)


def stream_response(
    service: SpeechCore, stream: AudioStream, body: AsyncIterator[bytes], media_type: str, **headers: str
) -> Response:
    """``body`` (made from ``stream``) as a :class:`JobResponse`, which owns ``stream``'s request."""
    return JobResponse(stream, body, service.settings.send_timeout_s, media_type=media_type, headers=headers or None)


async def answer_whole(
    request: Request, service: SpeechCore, collect: Callable[[AudioStream], Awaitable[Response]],
    text: str, voice: Voice, output: Output, request_id: str, route: str,
) -> Response:
    """A ``stream: false`` answer, the same on every whole-file route: at most
    ``--max-whole-files`` at once (beyond, ``busy``, before anything is queued); the request
    held by ``SpeechCore.request``, so it is cancelled however this ends; cancelled at once
    when the client hangs up (499: nobody is left to read it).
    ``collect`` reads the whole answer and makes the response; a refusal or a failure
    before it is whole raises its :class:`SpeechFault`."""
    if service.whole_files >= service.settings.max_whole_files:
        raise RequestRejected(
            ErrorCode.BUSY,
            f"{service.whole_files} whole-file responses are being prepared; try again shortly or ask for a stream.",
        )
    service.whole_files += 1
    try:
        async with service.request(text, voice, output, request_id, route) as stream:
            collecting = asyncio.ensure_future(collect(stream))
            hang_up = asyncio.ensure_future(_disconnect(request))
            try:
                await asyncio.wait((collecting, hang_up), return_when=asyncio.FIRST_COMPLETED)
            finally:
                hang_up.cancel()
                if not collecting.done():
                    stream.job.cancel()
                    collecting.cancel()
                await asyncio.gather(collecting, hang_up, return_exceptions=True)
            if collecting.cancelled():
                return Response(status_code=499)
            return collecting.result()  # raises the request's JobFailed
    finally:
        service.whole_files -= 1


async def _disconnect(request: Request) -> None:
    """Returns when the client hangs up (the body has been read: only that can come)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def invocations(request: Request) -> Response:
    service: SpeechCore = request.app.state.service
    try:
        body = parse_post_request(await read_body(request, service.settings.max_body_bytes))
        rid = body.request_id or "invocation"
        sse = "text/event-stream" in request.headers.get("accept", "")
        voice, output = Voice(body.voice, body.speed, body.lang), Output(body.format, body.sample_rate)
        if not body.stream and not sse:
            return await answer_whole(request, service, _whole_file, body.text, voice, output, rid, "invocations")
        stream = start_stream(service, body.text, voice, output, rid, "invocations")
    except SpeechFault as fault:
        return fault_response(service, fault)
    if sse:
        return stream_response(service, stream, _sse_events(stream, rid), "text/event-stream",
                          **{"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    return stream_response(service, stream, audio_body(stream), stream.encoder.content_type)


async def _whole_file(stream: AudioStream) -> Response:
    """``stream: false`` on ``/invocations``: the whole file, with its duration and cost in headers."""
    async with contextlib.aclosing(aiter(stream)) as chunks:
        data = b"".join([chunk async for chunk in chunks])
    if stream.result is None:
        raise SynthesisFailed(ErrorCode.INTERNAL, "Synthesis failed for this request.")
    if stream.encoder.format == "wav":
        data = finalize_wav(data)
    job = stream.job
    headers = {
        "X-Audio-Duration": f"{job.audio_seconds:.3f}",
        "X-Inference-Time-Ms": f"{job.model_seconds * 1000:.1f}",
        "X-RTF": f"{job.model_seconds / job.audio_seconds:.3f}" if job.audio_seconds else "0",
    }
    return Response(data, media_type=stream.encoder.content_type, headers=headers)


async def openai_speech(request: Request) -> Response:
    """OpenAI's speech API: the official SDK works against it unchanged."""
    service: SpeechCore = request.app.state.service
    try:
        body = parse_openai_request(await read_body(request, service.settings.max_body_bytes))
        stream = start_stream(service, body.input, Voice(body.kokoro_voice, body.speed, body.lang),
                              Output(body.audio_format, 24000), "openai", "openai")
    except SpeechFault as fault:
        return fault_response(service, fault)
    if body.stream_format == "sse":
        return stream_response(service, stream, _openai_sse_events(stream), "text/event-stream")
    return stream_response(service, stream, audio_body(stream), stream.encoder.content_type)
