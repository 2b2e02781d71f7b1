"""What every route shares: validate a request, queue it, and encode its audio as it comes.

The WebSocket session, ``POST /invocations`` and ``POST /v1/audio/speech`` differ only in
framing; admission, validation, scheduling, encoding and metrics live here once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from voicestream.audio import StreamEncoder, create_encoder
from voicestream.engine import InvalidInputError, KokoroEngine
from voicestream.protocol import ErrorCode, SynthesisComplete, SynthesisStart
from voicestream.server.metrics import ServerMetrics
from voicestream.server.scheduler import (
    BusyError,
    JobState,
    Listener,
    RenderFailed,
    SynthesisJob,
    SynthesisScheduler,
)
from voicestream.server.settings import ServerSettings

log = logging.getLogger(__name__)

_HTTP_STATUS = {
    ErrorCode.BUSY: 503, ErrorCode.TEXT_TOO_LONG: 413, ErrorCode.PAYLOAD_TOO_LARGE: 413,
    ErrorCode.REQUEST_STALE: 408, ErrorCode.INTERNAL: 500,
}


def http_status(code: ErrorCode) -> int:
    """The HTTP status that answers a refusal with ``code``."""
    return _HTTP_STATUS.get(code, 400)


class RequestRejected(Exception):
    """A request refused before any audio: a protocol code and a message for people."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def http_status(self) -> int:
        return http_status(self.code)


class SynthesisFailed(Exception):
    """The engine or the encoder failed mid-request; the cause is in the server log, once."""


@dataclass(frozen=True)
class StreamResult:
    audio_bytes: int
    total_duration_s: float
    elapsed_s: float
    first_audio_ms: float | None

    def complete_frame(self, request_id: str) -> SynthesisComplete:
        return SynthesisComplete(
            request_id=request_id,
            audio_bytes=self.audio_bytes,
            total_duration_s=round(self.total_duration_s, 4),
            elapsed_s=round(self.elapsed_s, 4),
            first_audio_ms=None if self.first_audio_ms is None else round(self.first_audio_ms, 1),
        )


class AudioStream:
    """A job's audio, encoded chunk by chunk in the requested format."""

    def __init__(self, job: SynthesisJob, encoder: StreamEncoder, metrics: ServerMetrics, route: str) -> None:
        self.job = job
        self.encoder = encoder
        self.metrics = metrics
        self.route = route
        self.result: StreamResult | None = None

    def start_frame(self, request_id: str) -> SynthesisStart:
        return SynthesisStart(request_id=request_id, format=self.encoder.format, sample_rate=self.encoder.sample_rate)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """The encoded audio; any failure (engine or encoder) ends it as :class:`SynthesisFailed`."""
        sent = 0
        first_audio_ms: float | None = None
        try:
            async for samples in self.job.audio():
                data = self.encoder.encode(samples)
                if data:
                    if first_audio_ms is None:
                        first_audio_ms = (time.monotonic() - self.job.arrival) * 1000
                        self.metrics.time_to_first_audio.labels(route=self.route).observe(first_audio_ms / 1000)
                    sent += len(data)
                    yield data
            if self.job.state is JobState.CANCELLED:
                return
            tail = self.encoder.finish()
        except RenderFailed as failure:  # the scheduler has logged the engine's cause
            raise SynthesisFailed("Synthesis failed for this request.") from failure
        except Exception as error:
            log.error("encoding failed", exc_info=error, extra={"request_id": self.job.request_id})
            self.job.cancel()
            raise SynthesisFailed("Encoding the audio failed for this request.") from error
        if tail:
            sent += len(tail)
            yield tail
        if self.job.audio_seconds:
            self.metrics.real_time_factor.observe(self.job.model_seconds / self.job.audio_seconds)
        self.result = StreamResult(
            audio_bytes=sent,
            total_duration_s=self.job.audio_seconds,
            elapsed_s=time.monotonic() - self.job.arrival,
            first_audio_ms=first_audio_ms,
        )


class BidiSessionLike(Protocol):
    """What the service needs of a session to drain it (the session module imports this one)."""

    @property
    def idle(self) -> bool: ...

    def go_away(self) -> None: ...


class SpeechService:
    """The engine, its scheduler, the limits and the metrics of one server."""

    def __init__(self, engine: KokoroEngine, settings: ServerSettings, metrics: ServerMetrics) -> None:
        self.engine = engine
        self.settings = settings
        self.metrics = metrics
        self.scheduler = SynthesisScheduler(engine, max_queue=settings.max_queue)
        self.sessions: set[BidiSessionLike] = set()
        self.draining = False
        """Set on SIGTERM: new sessions and requests are refused with ``busy``."""
        self._sessions = 0
        metrics.queue_depth.set_function(lambda: self.scheduler.depth)
        metrics.rendered_audio.set_function(lambda: self.scheduler.rendered_seconds)

    @property
    def drained(self) -> bool:
        """Nothing accepted is left to render or to send."""
        return self.scheduler.depth == 0 and all(session.idle for session in self.sessions)

    def admit_session(self) -> bool:
        if self._sessions >= self.settings.max_sessions:
            return False
        self._sessions += 1
        self.metrics.active_sessions.set(self._sessions)
        return True

    def release_session(self, _duration_s: float) -> None:
        self._sessions -= 1
        self.metrics.active_sessions.set(self._sessions)

    def check(
        self, text: str, voice: str, speed: float, timestamp: float | None, language: str | None = None
    ) -> str:
        """Raise :class:`RequestRejected` for what only the server can judge: age, voice, length;
        return the language the text will be read in.

        Format, sample rate and field types were already checked by the protocol layer's
        parsers, which answer with their own codes.
        """
        if timestamp is not None and time.time() - timestamp > self.settings.stale_after_s:
            raise RequestRejected(
                ErrorCode.REQUEST_STALE,
                f"The request is {time.time() - timestamp:.1f} s old; requests older than "
                f"{self.settings.stale_after_s:g} s are refused.",
            )
        try:
            self.engine.check(text, voice, speed, language)
            return self.engine.language_for(voice, language)
        except InvalidInputError as error:
            raise RequestRejected(ErrorCode(error.code), error.message) from None

    def start(
        self, text: str, voice: str, speed: float, timestamp: float | None,
        listener: Listener, request_id: str, route: str, language: str | None = None,
    ) -> SynthesisJob:
        """Validate and queue one request; synthesis starts as soon as the scheduler allows.

        ``language`` (the request's ``lang``) overrides the voice's own language."""
        if self.draining:
            raise RequestRejected(ErrorCode.BUSY, "The server is shutting down; try another instance.")
        spoken_language = self.check(text, voice, speed, timestamp, language)
        try:
            job = self.scheduler.submit(SynthesisJob(text, voice, speed, listener, request_id, spoken_language))
        except BusyError as error:
            raise RequestRejected(ErrorCode.BUSY, str(error)) from None
        self.metrics.requests.labels(route=route).inc()
        return job

    def stream(self, job: SynthesisJob, format: str, sample_rate: int, route: str) -> AudioStream:
        return AudioStream(job, create_encoder(format, sample_rate), self.metrics, route)
