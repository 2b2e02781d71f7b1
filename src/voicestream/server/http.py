"""``POST /invocations`` and the OpenAI-compatible ``POST /v1/audio/speech``.

Both stream audio as it is produced; a client that goes away cancels its request, so the
engine stops at the next piece and nothing is left queued.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from voicestream.audio import finalize_wav
from voicestream.protocol import (
    AudioEvent,
    ErrorCode,
    ErrorFrame,
    ProtocolError,
    encode_sse,
    parse_openai_request,
    parse_post_request,
)
from voicestream.server.requests import (
    AudioStream,
    RequestRejected,
    SpeechService,
    SynthesisFailed,
    http_status,
)
from voicestream.server.scheduler import Listener


def error_response(code: ErrorCode | str, message: str, status: int = 400) -> Response:
    return Response(ErrorFrame(code=str(code), message=message).to_http_json(), status, media_type="application/json")


def _rejected(service: SpeechService, code: ErrorCode, message: str, status: int) -> Response:
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


async def _cancel_on_exit(stream: AudioStream) -> AsyncIterator[bytes]:
    try:
        async for data in stream:
            yield data
    except SynthesisFailed:
        return  # headers are gone; the client sees a short body, the log has the cause
    finally:
        stream.job.cancel()


async def _sse_events(stream: AudioStream, request_id: str) -> AsyncIterator[bytes]:
    seq = 0
    try:
        async for data in stream:
            yield encode_sse(AudioEvent.from_audio(seq, data))
            seq += 1
        if stream.result is not None:
            yield encode_sse(stream.result.complete_frame(request_id))
    except SynthesisFailed as failure:
        yield encode_sse(ErrorFrame(request_id=request_id, code=ErrorCode.INTERNAL, message=str(failure)))
    finally:
        stream.job.cancel()


async def _openai_sse_events(stream: AudioStream) -> AsyncIterator[bytes]:
    """OpenAI's speech SSE: ``speech.audio.delta`` events with base64 audio, then ``speech.audio.done``."""
    try:
        async for data in stream:
            yield encode_sse({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")})
        if stream.result is not None:
            yield encode_sse({"type": "speech.audio.done", "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}})
    except SynthesisFailed as failure:
        yield encode_sse({"type": "error", "error": {"code": ErrorCode.INTERNAL.value, "message": str(failure)}})
    finally:
        stream.job.cancel()


async def _start(
    service: SpeechService, text: str, voice: str, speed: float, format: str, sample_rate: int,
    timestamp: float | None, request_id: str, route: str, language: str | None = None,
) -> AudioStream:
    job = service.start(text, voice, speed, timestamp, Listener(), request_id, route, language)
    return service.stream(job, format, sample_rate, route)


async def invocations(request: Request) -> Response:
    service: SpeechService = request.app.state.service
    try:
        body = parse_post_request(await read_body(request, service.settings.max_body_bytes))
        rid = body.request_id or "invocation"
        stream = await _start(
            service, body.text, body.voice, body.speed, body.format, body.sample_rate,
            body.request_timestamp, rid, route="invocations", language=body.lang,
        )
    except ProtocolError as error:
        return _rejected(service, error.code, error.message, http_status(error.code))
    except RequestRejected as rejected:
        return _rejected(service, rejected.code, rejected.message, rejected.http_status)

    if "text/event-stream" in request.headers.get("accept", ""):
        return StreamingResponse(_sse_events(stream, rid), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    if body.stream:
        return StreamingResponse(_cancel_on_exit(stream), media_type=stream.encoder.content_type)
    return await _whole_file(request, service, stream)


async def _collect(stream: AudioStream) -> bytes:
    async with contextlib.aclosing(_cancel_on_exit(stream)) as chunks:
        return b"".join([chunk async for chunk in chunks])


async def _disconnect(request: Request) -> None:
    """Returns when the client hangs up (the body has been read: only that can come)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _whole_file(request: Request, service: SpeechService, stream: AudioStream) -> Response:
    """``stream: false``: the whole file, with its duration and cost in headers. A client
    that hangs up before it is ready cancels the synthesis."""
    collecting = asyncio.ensure_future(_collect(stream))
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
        return Response(status_code=499)  # nobody is left to read it
    data = collecting.result()
    if stream.result is None:
        return _rejected(service, ErrorCode.INTERNAL, "Synthesis failed for this request.", 500)
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
    service: SpeechService = request.app.state.service
    try:
        body = parse_openai_request(await read_body(request, service.settings.max_body_bytes))
        stream = await _start(
            service, body.input, body.kokoro_voice, body.speed, body.audio_format, 24000,
            None, "openai", route="openai", language=body.lang,
        )
    except ProtocolError as error:
        return _rejected(service, error.code, error.message, http_status(error.code))
    except RequestRejected as rejected:
        return _rejected(service, rejected.code, rejected.message, rejected.http_status)
    if body.stream_format == "sse":
        return StreamingResponse(_openai_sse_events(stream), media_type="text/event-stream")
    return StreamingResponse(_cancel_on_exit(stream), media_type=stream.encoder.content_type)
