"""``POST /dev/captioned_speech``: Kokoro-FastAPI's route for audio with word timestamps.

Its clients work unchanged: the body is OpenAI's speech request (plus ``stream``, true by
default, and ``return_timestamps``); the answer is ``{"audio": base64, "audio_format":
content type, "timestamps": [{"word", "start_time", "end_time"}]}``, or with ``stream``
one such object per line, each with one piece's audio and that piece's words (times from
the start of the whole answer's audio).

Like every route it is a thin adapter over the core: the request is queued with the
scheduler (its slot, budgets, drain and metrics), which times the words of each piece as it
renders it. Its answers are owned as ``POST /invocations``' are: a streamed one is a
`JobResponse`; with ``stream: false`` it is counted against ``--max-whole-files`` and
cancelled when the client hangs up (`answer_whole`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Sequence

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from voicestream.audio import ENGINE_SAMPLE_RATE, StreamEncoder
from voicestream.engine.alignment import TimedWord
from voicestream.protocol import SpeechFault, parse_captioned_request
from voicestream.server import streaming
from voicestream.speech.core import AudioStream, Output, SpeechCore, Voice


def kokoro_timestamps(words: Sequence[TimedWord]) -> list[dict[str, object]]:
    """Word times as Kokoro-FastAPI names them."""
    return [{"word": w.word, "start_time": round(w.start_s, 3), "end_time": round(w.end_s, 3)} for w in words]


def _answer(audio: bytes, encoder: StreamEncoder, words: Sequence[TimedWord] | None) -> dict[str, object]:
    answer: dict[str, object] = {"audio": base64.b64encode(audio).decode("ascii"), "audio_format": encoder.content_type}
    if words is not None:
        answer["timestamps"] = kokoro_timestamps(words)
    return answer


def _lines(stream: AudioStream, with_words: bool) -> AsyncIterator[bytes]:
    """One object a line, each with one piece's audio (and words); a failure after the
    headers ends the body short (the log has the cause)."""
    return streaming.stream_body(stream, lambda chunk, _: [
        (json.dumps(_answer(chunk.data, stream.encoder, chunk.words if with_words else None)) + "\n").encode()
    ] if chunk.data else [])


async def _whole(stream: AudioStream, with_words: bool) -> Response:
    """``stream: false``: the whole audio and all its words in one object."""
    data, words = await streaming.collect(stream)  # raises the request's JobFailed
    return JSONResponse(_answer(data, stream.encoder, words if with_words else None))


async def captioned_speech(request: Request) -> Response:
    service: SpeechCore = request.app.state.service
    try:
        body = parse_captioned_request(await streaming.read_body(request, service.settings.max_body_bytes))
        voice = Voice(body.kokoro_voice, body.speed, body.lang)
        output = Output(body.audio_format, ENGINE_SAMPLE_RATE, word_timestamps=body.return_timestamps)
        if not body.stream:
            return await streaming.answer_whole(request, service, lambda stream: _whole(stream, body.return_timestamps),
                                      body.input, voice, output, "captioned", "captioned")
        stream = streaming.start_stream(service, body.input, voice, output, "captioned", "captioned")
    except SpeechFault as fault:
        return streaming.fault_response(service, fault)
    return streaming.stream_response(service, stream, _lines(stream, body.return_timestamps), "application/json")
