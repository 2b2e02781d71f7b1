"""``POST /dev/captioned_speech``: Kokoro-FastAPI's route for audio with word timestamps.

Its clients work unchanged: the body is OpenAI's speech request (plus ``stream``, true by
default, and ``return_timestamps``); the answer is ``{"audio": base64, "audio_format":
content type, "timestamps": [{"word", "start_time", "end_time"}]}``, or with ``stream``
one such object per line, each with one piece's audio and that piece's words (times from
the start of the whole answer's audio).

Like every route it is a thin adapter over the core: the request is queued with the
scheduler (its slot, budgets, drain and metrics), which times the words of each piece as it
renders it.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator, Sequence

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from voicestream.audio import StreamEncoder, finalize_wav
from voicestream.protocol import ProtocolError, WordTiming, parse_captioned_request
from voicestream.server.http import BoundedStreamingResponse, _rejected, read_body
from voicestream.server.job import Listener
from voicestream.server.requests import (
    AudioStream,
    RequestRejected,
    SpeechService,
    SynthesisFailed,
    http_status,
)


def kokoro_timestamps(words: Sequence[WordTiming]) -> list[dict[str, object]]:
    """Word times as Kokoro-FastAPI names them."""
    return [{"word": w.word, "start_time": round(w.start_s, 3), "end_time": round(w.end_s, 3)} for w in words]


def _answer(audio: bytes, encoder: StreamEncoder, words: Sequence[WordTiming] | None) -> dict[str, object]:
    answer: dict[str, object] = {"audio": base64.b64encode(audio).decode("ascii"), "audio_format": encoder.content_type}
    if words is not None:
        answer["timestamps"] = kokoro_timestamps(words)
    return answer


async def _lines(stream: AudioStream, with_words: bool) -> AsyncIterator[bytes]:
    try:
        async with contextlib.aclosing(stream.chunks()) as chunks:
            async for chunk in chunks:
                if chunk.data:
                    answer = _answer(chunk.data, stream.encoder, chunk.words if with_words else None)
                    yield (json.dumps(answer) + "\n").encode()
    except SynthesisFailed:
        return  # the lines so far are sent; the log has the cause
    finally:
        stream.job.cancel()


async def captioned_speech(request: Request) -> Response:
    service: SpeechService = request.app.state.service
    try:
        body = parse_captioned_request(await read_body(request, service.settings.max_body_bytes))
        job = service.start(
            body.input, body.kokoro_voice, body.speed, Listener(), "captioned", "captioned",
            body.audio_format, service.engine.sample_rate, body.lang, word_timestamps=body.return_timestamps,
        )
    except ProtocolError as error:
        return _rejected(service, error.code, error.message, http_status(error.code))
    except RequestRejected as rejected:
        return _rejected(service, rejected.code, rejected.message, rejected.http_status)
    stream = service.stream(job, route="captioned")
    if body.stream:
        return BoundedStreamingResponse(
            _lines(stream, body.return_timestamps), service.settings.send_timeout_s, media_type="application/json"
        )
    audio, words = bytearray(), []
    try:
        async with contextlib.aclosing(stream.chunks()) as chunks:
            async for chunk in chunks:
                audio += chunk.data
                words += chunk.words
    except SynthesisFailed as failure:
        return _rejected(service, failure.code, failure.message, http_status(failure.code))
    finally:
        job.cancel()
    data = finalize_wav(bytes(audio)) if body.audio_format == "wav" else bytes(audio)
    return JSONResponse(_answer(data, stream.encoder, words if body.return_timestamps else None))
