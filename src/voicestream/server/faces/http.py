"""``POST /invocations`` and the OpenAI-compatible ``POST /v1/audio/speech``.

Both stream audio as it is produced (raw, or as Server-Sent Events), or answer the whole file
with ``stream: false``; the request's ownership, the send loop and the whole-file limit are
`voicestream.server.streaming`'s, shared by every HTTP face: this module only parses and formats.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response

from voicestream.protocol import (
    AudioEvent,
    SpeechFault,
    encode_sse,
    fault_frame,
    parse_openai_request,
    parse_post_request,
)
from voicestream.server import streaming
from voicestream.speech.core import (
    AudioStream,
    Output,
    SpeechCore,
    StreamResult,
    SynthesisFailed,
    Voice,
)
from voicestream.speech.job import RenderedChunk


def _sse_events(stream: AudioStream, request_id: str) -> AsyncIterator[bytes]:
    seq = itertools.count()
    return streaming.stream_body(
        stream, lambda chunk, _: [encode_sse(AudioEvent.from_audio(next(seq), chunk.data))] if chunk.data else [],
        lambda result: encode_sse(result.complete_frame(request_id)),
        lambda failure: encode_sse(fault_frame(failure, request_id)),
    )


def _openai_delta(chunk: RenderedChunk, _start_s: float) -> list[bytes]:
    return [encode_sse({"type": "speech.audio.delta", "audio": base64.b64encode(chunk.data).decode("ascii")})] if chunk.data else []


def _openai_done(_result: StreamResult) -> bytes:
    return encode_sse({"type": "speech.audio.done", "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}})


def _openai_error(failure: SynthesisFailed) -> bytes:
    return encode_sse({"type": "error", "error": {"code": failure.code.value, "message": failure.message}})


def _openai_sse_events(stream: AudioStream) -> AsyncIterator[bytes]:
    """OpenAI's speech SSE: ``speech.audio.delta`` events with base64 audio, then ``speech.audio.done``."""
    return streaming.stream_body(stream, _openai_delta, _openai_done, _openai_error)


async def invocations(request: Request) -> Response:
    service: SpeechCore = request.app.state.service
    try:
        body = parse_post_request(await streaming.read_body(request, service.settings.max_body_bytes))
        rid = body.request_id or "invocation"
        sse = "text/event-stream" in request.headers.get("accept", "")
        voice, output = Voice(body.voice, body.speed, body.lang), Output(body.format, body.sample_rate)
        if not body.stream and not sse:
            return await streaming.answer_whole(request, service, _whole_file, body.text, voice, output, rid, "invocations")
        stream = streaming.start_stream(service, body.text, voice, output, rid, "invocations")
    except SpeechFault as fault:
        return streaming.fault_response(service, fault)
    if sse:
        return streaming.stream_response(service, stream, _sse_events(stream, rid), "text/event-stream",
                          **{"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    return streaming.stream_response(service, stream, streaming.audio_body(stream), stream.encoder.content_type)


async def _whole_file(stream: AudioStream) -> Response:
    """``stream: false`` on ``/invocations``: the whole file, with its duration and cost in headers."""
    data, _ = await streaming.collect(stream)
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
        body = parse_openai_request(await streaming.read_body(request, service.settings.max_body_bytes))
        stream = streaming.start_stream(service, body.input, Voice(body.kokoro_voice, body.speed, body.lang),
                              Output(body.audio_format, 24000), "openai", "openai")
    except SpeechFault as fault:
        return streaming.fault_response(service, fault)
    if body.stream_format == "sse":
        return streaming.stream_response(service, stream, _openai_sse_events(stream), "text/event-stream")
    return streaming.stream_response(service, stream, streaming.audio_body(stream), stream.encoder.content_type)
