"""One way to answer one request over HTTP, for every HTTP face (``/invocations``, OpenAI,
captioned speech, Cartesia's, Deepgram's and ElevenLabs' REST routes).

A face reads its body (`read_body`), starts its request (`start_stream`, or `answer_whole`
for a whole file) and formats; everything else is here once:

- **one send loop** (`stream_body`): the request's audio piece by piece, each piece formatted by
  the face (raw bytes, an SSE event, a JSON line), then the face's closing frame once the
  audio is all out, or its error frame for a failure after the headers (or none: the body
  ends short, and the log has the cause);
- **one collection** (`collect`) of a whole answer's audio and words;
- **ownership**: a streamed answer is a :class:`JobResponse`, which ends its request and
  closes its listener however it ends, even when its body never started (Python never runs
  an async generator's ``finally`` if it is closed before its first step); a ``stream:
  false`` answer (`answer_whole`) holds its request in ``SpeechCore.request`` for as long as
  it collects, counted against ``--max-whole-files`` and cancelled when the client hangs up.

Each body chunk must leave within ``send_timeout_s``; a client that goes away cancels its
request, so the engine stops at the next piece and nothing is left queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from voicestream.asgi import BoundedStreamingResponse
from voicestream.audio import finalize_wav
from voicestream.engine.alignment import TimedWord
from voicestream.protocol import ErrorCode, ErrorFrame, ProtocolError, SpeechFault
from voicestream.speech.core import (
    AudioStream,
    Output,
    RequestRejected,
    SpeechCore,
    StreamResult,
    SynthesisFailed,
    Voice,
)
from voicestream.speech.job import Listener, RenderedChunk

Piece = Callable[[RenderedChunk, float], Iterable[bytes]]
"""A face's body chunks for one piece of audio, given the piece's start in the request's audio."""


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
    service.metrics.errors.labels(code=fault.code.value).inc()
    return error_response(fault.code, fault.message, fault.http_status)


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


async def stream_body(
    stream: AudioStream, piece: Piece, done: Callable[[StreamResult], bytes] | None = None,
    failed: Callable[[SynthesisFailed], bytes] | None = None,
) -> AsyncIterator[bytes]:
    """``stream``'s audio as a response body: ``piece`` formats each piece of audio (with its
    start in the request's audio), ``done`` what follows the last, ``failed`` a failure after
    the headers (without it the body ends short; the log has the cause)."""
    start_s = 0.0
    try:
        async with contextlib.aclosing(stream.chunks()) as chunks:
            async for chunk in chunks:
                for part in piece(chunk, start_s):
                    yield part
                start_s += chunk.seconds
        if done is not None and stream.result is not None:
            yield done(stream.result)
    except SynthesisFailed as failure:
        if failed is not None:
            yield failed(failure)


def audio_body(stream: AudioStream) -> AsyncIterator[bytes]:
    """The audio as a raw body."""
    return stream_body(stream, lambda chunk, _: (chunk.data,) if chunk.data else ())


async def collect(stream: AudioStream) -> tuple[bytes, list[TimedWord]]:
    """All of a request's audio (a WAV file whole, its header's sizes filled in) and all its
    words; a failure raises its `SynthesisFailed`, and so does audio that ended short."""
    data = bytearray()
    words: list[TimedWord] = []
    async with contextlib.aclosing(stream.chunks()) as chunks:
        async for chunk in chunks:
            data += chunk.data
            words += chunk.words
    if stream.result is None:
        raise SynthesisFailed(ErrorCode.INTERNAL, "Synthesis failed for this request.")
    return (finalize_wav(bytes(data)) if stream.encoder.format == "wav" else bytes(data)), words


def start_stream(
    service: SpeechCore, text: str, voice: Voice, output: Output, request_id: str, route: str
) -> AudioStream:
    """``SpeechCore.start`` on a listener of its own. The caller hands the stream to a
    :class:`JobResponse` (`stream_response`) at once, with nothing awaited in between, so that
    the request is owned from birth."""
    job = service.start(text, voice, output, Listener(), request_id, route)
    return service.stream(job, route)


def stream_response(
    service: SpeechCore, stream: AudioStream, content: AsyncIterator[bytes], media_type: str, **headers: str
) -> Response:
    """``content`` (made from ``stream``) as a :class:`JobResponse`, which owns ``stream``'s request."""
    return JobResponse(stream, content, service.settings.send_timeout_s, media_type=media_type, headers=headers or None)


async def answer_whole(
    request: Request, service: SpeechCore, respond: Callable[[AudioStream], Awaitable[Response]],
    text: str, voice: Voice, output: Output, request_id: str, route: str,
) -> Response:
    """A ``stream: false`` answer, the same on every whole-file route: at most
    ``--max-whole-files`` at once (beyond, ``busy``, before anything is queued); the request
    held by ``SpeechCore.request``, so it is cancelled however this ends; cancelled at once
    when the client hangs up (499: nobody is left to read it).
    ``respond`` reads the whole answer (`collect`) and makes the response; a refusal or a
    failure before it is whole raises its :class:`SpeechFault`."""
    if service.whole_files >= service.settings.max_whole_files:
        raise RequestRejected(
            ErrorCode.BUSY,
            f"{service.whole_files} whole-file responses are being prepared; try again shortly or ask for a stream.",
        )
    service.whole_files += 1
    try:
        async with service.request(text, voice, output, request_id, route) as stream:
            collecting = asyncio.ensure_future(respond(stream))
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
