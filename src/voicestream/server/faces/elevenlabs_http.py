"""ElevenLabs' speech routes over HTTP: ``POST /v1/text-to-speech/{voice_id}`` and ``/stream``, and
``/with-timestamps`` for both.

LiveKit's ``elevenlabs.TTS.synthesize()`` reads ``/stream`` and pipecat's ``ElevenLabsHttpTTSService``
``/stream/with-timestamps``. The voice in the path is a Kokoro voice or blend; ``output_format``
(query, default ``mp3_44100_128``) names the encoder (`parse_output_format`); the body's ``text``
is spoken, ``voice_settings.speed`` and ``language_code`` are used, and ``model_id``,
``previous_text``, ``next_text``, ``seed`` and the rest are accepted and ignored, as are the
``optimize_streaming_latency`` and ``enable_logging`` queries.

- ``/stream`` streams the audio as it renders; ``/stream/with-timestamps`` streams one JSON object
  a line (``audio_base64``, ``alignment``, ``normalized_alignment``), each chunk's characters
  timed in seconds from the start of the request's audio;
- the route without ``/stream`` answers the whole file, and ``/with-timestamps`` one JSON object
  with all the audio and all the characters: whole-file answers, under ``--max-whole-files``
  (`http.answer_whole`).

The key may come as ``xi-api-key`` (the access policy's, as on every route); errors are the
server's ``{"error": {code, message}}`` with the code's status.
"""

from __future__ import annotations

import base64

from starlette.requests import Request
from starlette.responses import Response

from voicestream.protocol import SpeechFault, load_json_object
from voicestream.protocol.elevenlabs import (
    DEFAULT_OUTPUT_FORMAT,
    HttpAlignment,
    TimedAudio,
    char_alignment,
    parse_output_format,
    parse_speech_request,
    spoken_language,
)
from voicestream.server import streaming
from voicestream.server.faces.elevenlabs import ROUTE, output_of
from voicestream.speech.core import AudioStream, Output, SpeechCore, Voice
from voicestream.speech.job import RenderedChunk

NDJSON = "application/x-ndjson"


async def _read(request: Request, service: SpeechCore, timed: bool) -> tuple[str, Voice, Output]:
    """The request's text, voice and audio (a refusal raises its `SpeechFault`)."""
    voice = request.path_params["voice_id"]
    output = output_of(parse_output_format(request.query_params.get("output_format", DEFAULT_OUTPUT_FORMAT)), timed)
    body = parse_speech_request(load_json_object(await streaming.read_body(request, service.settings.max_body_bytes)))
    language = spoken_language(body.language_code, voice)
    return body.text, Voice(voice, body.voice_settings.speed, language, body.dictionaries), output


async def _answer(request: Request, timed: bool, whole: bool) -> Response:
    service: SpeechCore = request.app.state.service
    try:
        text, voice, output = await _read(request, service, timed)
        if whole:
            return await streaming.answer_whole(request, service, _whole_timed if timed else _whole_audio, text, voice, output,
                                      ROUTE, ROUTE)
        stream = streaming.start_stream(service, text, voice, output, ROUTE, ROUTE)
    except SpeechFault as fault:
        return streaming.fault_response(service, fault)
    if timed:
        return streaming.stream_response(service, stream, streaming.stream_body(stream, _timed_line), NDJSON)
    return streaming.stream_response(service, stream, streaming.audio_body(stream), stream.encoder.content_type)


async def _whole_audio(stream: AudioStream) -> Response:
    data, _ = await streaming.collect(stream)
    return Response(data, media_type=stream.encoder.content_type)


async def _whole_timed(stream: AudioStream) -> Response:
    data, words = await streaming.collect(stream)
    alignment = HttpAlignment.of(char_alignment(words, 0.0, stream.job.audio_seconds))
    answer = TimedAudio(audio_base64=base64.b64encode(data).decode("ascii"), alignment=alignment,
                        normalized_alignment=alignment)
    return Response(answer.to_json(), media_type="application/json")


def _timed_line(chunk: RenderedChunk, start_s: float) -> list[bytes]:
    """One JSON line per chunk of audio, its characters timed from the start of the request's audio."""
    if not chunk.data:
        return []
    times = char_alignment(chunk.words, start_s, start_s + chunk.seconds)
    alignment = HttpAlignment.of(times, start_s) if times.chars else None
    line = TimedAudio(audio_base64=base64.b64encode(chunk.data).decode("ascii"), alignment=alignment,
                      normalized_alignment=alignment)
    return [line.to_json().encode() + b"\n"]


async def speech(request: Request) -> Response:
    """``POST /v1/text-to-speech/{voice_id}``: the whole file."""
    return await _answer(request, timed=False, whole=True)


async def speech_stream(request: Request) -> Response:
    """``POST /v1/text-to-speech/{voice_id}/stream``: the audio as it renders."""
    return await _answer(request, timed=False, whole=False)


async def speech_with_timestamps(request: Request) -> Response:
    """``POST /v1/text-to-speech/{voice_id}/with-timestamps``: all the audio and characters, one JSON object."""
    return await _answer(request, timed=True, whole=True)


async def speech_stream_with_timestamps(request: Request) -> Response:
    """``POST /v1/text-to-speech/{voice_id}/stream/with-timestamps``: one JSON object a line."""
    return await _answer(request, timed=True, whole=False)
