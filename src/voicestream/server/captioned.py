"""``POST /dev/captioned_speech``: Kokoro-FastAPI's route for audio with word timestamps.

Its clients work unchanged: the body is OpenAI's speech request (plus ``stream``, true by
default, and ``return_timestamps``); the answer is ``{"audio": base64, "audio_format":
content type, "timestamps": [{"word", "start_time", "end_time"}]}``, or with ``stream``
one such object per line, each with one piece's audio and that piece's words (times from
the start of the whole answer's audio).

The scheduler renders bare audio, so this route renders through the engine's
`stream_timed` in a worker thread, after the service's own checks (`SpeechService.check`);
it does not hold a scheduler slot (see the word-times notes in docs/PROTOCOL.md).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Iterator, Sequence

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from voicestream.audio import StreamEncoder, create_encoder, finalize_wav
from voicestream.engine import KokoroEngine
from voicestream.engine.kokoro import RenderedPiece
from voicestream.protocol import (
    CaptionedSpeechRequest,
    ErrorCode,
    ProtocolError,
    WordTiming,
    parse_captioned_request,
)
from voicestream.server.http import _rejected, read_body
from voicestream.server.requests import RequestRejected, SpeechService, http_status


def kokoro_timestamps(words: Sequence[WordTiming]) -> list[dict[str, object]]:
    """Word times as Kokoro-FastAPI names them."""
    return [{"word": w.word, "start_time": round(w.start_s, 3), "end_time": round(w.end_s, 3)} for w in words]


def _answer(audio: bytes, encoder: StreamEncoder, words: Sequence[WordTiming] | None) -> dict[str, object]:
    answer: dict[str, object] = {"audio": base64.b64encode(audio).decode("ascii"), "audio_format": encoder.content_type}
    if words is not None:
        answer["timestamps"] = kokoro_timestamps(words)
    return answer


async def _pieces(engine: KokoroEngine, body: CaptionedSpeechRequest, language: str) -> AsyncIterator[RenderedPiece]:
    pieces: Iterator[RenderedPiece] = engine.stream_timed(
        body.input, body.kokoro_voice, body.speed, language=language, words=body.return_timestamps
    )
    while (piece := await asyncio.to_thread(next, pieces, None)) is not None:
        yield piece


async def _lines(engine: KokoroEngine, body: CaptionedSpeechRequest, language: str) -> AsyncIterator[bytes]:
    encoder = create_encoder(body.audio_format, engine.sample_rate)
    async for piece in _pieces(engine, body, language):
        audio = encoder.encode(piece.audio)
        if audio:
            yield (json.dumps(_answer(audio, encoder, piece.words if body.return_timestamps else None)) + "\n").encode()
    if tail := encoder.finish():
        yield (json.dumps(_answer(tail, encoder, [] if body.return_timestamps else None)) + "\n").encode()


async def captioned_speech(request: Request) -> Response:
    service: SpeechService = request.app.state.service
    try:
        body = parse_captioned_request(await read_body(request, service.settings.max_body_bytes))
        if service.draining:
            raise RequestRejected(ErrorCode.BUSY, "The server is shutting down; try another instance.")
        language = service.check(body.input, body.kokoro_voice, body.speed, body.lang)
    except ProtocolError as error:
        return _rejected(service, error.code, error.message, http_status(error.code))
    except RequestRejected as rejected:
        return _rejected(service, rejected.code, rejected.message, rejected.http_status)
    service.metrics.requests.labels(route="captioned").inc()
    if body.stream:
        return StreamingResponse(_lines(service.engine, body, language), media_type="application/json")
    encoder = create_encoder(body.audio_format, service.engine.sample_rate)
    audio, words = bytearray(), []
    async for piece in _pieces(service.engine, body, language):
        audio += encoder.encode(piece.audio)
        words += piece.words
    audio += encoder.finish()
    data = finalize_wav(bytes(audio)) if body.audio_format == "wav" else bytes(audio)
    return JSONResponse(_answer(data, encoder, words if body.return_timestamps else None))
