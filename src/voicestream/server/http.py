"""``POST /invocations`` and the OpenAI-compatible ``POST /v1/audio/speech``.

Both stream audio as it is produced; a client that goes away cancels its request, so the
engine stops at the next piece and nothing is left queued. Each body chunk must leave
within ``send_timeout_s``, and however a response ends its request ends with it (its queue
slot and buffered audio are freed, and drain sees it until then).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Message, Receive, Scope, Send

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
from voicestream.server.job import Listener
from voicestream.server.requests import (
    AudioStream,
    RequestRejected,
    SpeechService,
    SynthesisFailed,
    http_status,
)

log = logging.getLogger(__name__)


class BoundedStreamingResponse(StreamingResponse):
    """A streaming response whose every body chunk must leave within ``send_timeout_s``, and
    whose body generator is closed at once however the response ends (Starlette leaves an
    interrupted one to the garbage collector, and with it the request it consumes)."""

    def __init__(self, content: AsyncIterator[bytes], send_timeout_s: float, **kwargs: object) -> None:
        super().__init__(content, **kwargs)  # type: ignore[arg-type]
        self.send_timeout_s = send_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_within_timeout(message: Message) -> None:
            async with asyncio.timeout(self.send_timeout_s):
                await send(message)

        try:
            await super().__call__(scope, receive, send_within_timeout)
        except TimeoutError:
            log.warning("dropping a response whose client took nothing for %g s", self.send_timeout_s)
        finally:
            await self.body_iterator.aclose()  # type: ignore[attr-defined]


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
        yield encode_sse(ErrorFrame(request_id=request_id, code=failure.code, message=failure.message))
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
        yield encode_sse({"type": "error", "error": {"code": failure.code.value, "message": failure.message}})
    finally:
        stream.job.cancel()


async def _start(
    service: SpeechService, text: str, voice: str, speed: float, format: str, sample_rate: int,
    request_id: str, route: str, language: str | None = None,
) -> AudioStream:
    job = service.start(text, voice, speed, Listener(), request_id, route, format, sample_rate, language)
    return service.stream(job, route)


def _streaming(service: SpeechService, body: AsyncIterator[bytes], media_type: str, **headers: str) -> Response:
    return BoundedStreamingResponse(
        body, service.settings.send_timeout_s, media_type=media_type, headers=headers or None
    )


async def invocations(request: Request) -> Response:
    service: SpeechService = request.app.state.service
    try:
        body = parse_post_request(await read_body(request, service.settings.max_body_bytes))
        rid = body.request_id or "invocation"
        whole_file = not body.stream and "text/event-stream" not in request.headers.get("accept", "")
        if whole_file and service.whole_files >= service.settings.max_whole_files:
            raise RequestRejected(
                ErrorCode.BUSY,
                f"{service.whole_files} whole-file responses are being prepared; try again shortly "
                "or ask for a stream.",
            )
        stream = await _start(
            service, body.text, body.voice, body.speed, body.format, body.sample_rate,
            rid, route="invocations", language=body.lang,
        )
    except ProtocolError as error:
        return _rejected(service, error.code, error.message, http_status(error.code))
    except RequestRejected as rejected:
        return _rejected(service, rejected.code, rejected.message, rejected.http_status)

    if "text/event-stream" in request.headers.get("accept", ""):
        return _streaming(service, _sse_events(stream, rid), "text/event-stream",
                          **{"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    if body.stream:
        return _streaming(service, _cancel_on_exit(stream), stream.encoder.content_type)
    service.whole_files += 1
    try:
        return await _whole_file(request, service, stream)
    finally:
        service.whole_files -= 1


async def _collect(stream: AudioStream) -> bytes:
    try:
        async with contextlib.aclosing(aiter(stream)) as chunks:
            return b"".join([chunk async for chunk in chunks])
    finally:
        stream.job.cancel()


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
    try:
        data = collecting.result()
    except SynthesisFailed as failure:
        return _rejected(service, failure.code, failure.message, http_status(failure.code))
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
            "openai", route="openai", language=body.lang,
        )
    except ProtocolError as error:
        return _rejected(service, error.code, error.message, http_status(error.code))
    except RequestRejected as rejected:
        return _rejected(service, rejected.code, rejected.message, rejected.http_status)
    if body.stream_format == "sse":
        return _streaming(service, _openai_sse_events(stream), "text/event-stream")
    return _streaming(service, _cancel_on_exit(stream), stream.encoder.content_type)
