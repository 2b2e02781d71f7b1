"""What every route shares: validate a request, queue it, and encode its audio as it comes.

The WebSocket session, ``POST /invocations`` and ``POST /v1/audio/speech`` differ only in
framing; admission, validation, scheduling, encoding and metrics live here once.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from voicestream.audio import StreamEncoder, create_encoder
from voicestream.engine import InvalidInputError, KokoroEngine
from voicestream.protocol import ErrorCode, SynthesisComplete, SynthesisStart
from voicestream.server.metrics import ServerMetrics
from voicestream.server.scheduler import (
    BusyError,
    JobState,
    Listener,
    SynthesisJob,
    SynthesisScheduler,
)
from voicestream.server.settings import ServerSettings

_HTTP_STATUS = {ErrorCode.BUSY: 503, ErrorCode.TEXT_TOO_LONG: 413, ErrorCode.REQUEST_STALE: 408, ErrorCode.INTERNAL: 500}


class RequestRejected(Exception):
    """A request refused before any audio: a protocol code and a message for people."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def http_status(self) -> int:
        return _HTTP_STATUS.get(self.code, 400)


class SynthesisFailed(Exception):
    """The engine failed mid-request; the details stay in the server log."""


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
        except Exception as error:  # the engine's own failure, reported without its text
            raise SynthesisFailed("Synthesis failed for this request.") from error
        if self.job.state is JobState.CANCELLED:
            return
        if tail := self.encoder.finish():
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


class SpeechService:
    """The engine, its scheduler, the limits and the metrics of one server."""

    def __init__(self, engine: KokoroEngine, settings: ServerSettings, metrics: ServerMetrics) -> None:
        self.engine = engine
        self.settings = settings
        self.metrics = metrics
        self.scheduler = SynthesisScheduler(engine, max_queue=settings.max_queue)
        self._sessions = 0
        metrics.queue_depth.set_function(lambda: self.scheduler.depth)

    def admit_session(self) -> bool:
        if self._sessions >= self.settings.max_sessions:
            return False
        self._sessions += 1
        self.metrics.active_sessions.set(self._sessions)
        return True

    def release_session(self, _duration_s: float) -> None:
        self._sessions -= 1
        self.metrics.active_sessions.set(self._sessions)

    def check(self, text: str, voice: str, speed: float, timestamp: float | None) -> None:
        """Raise :class:`RequestRejected` for what only the server can judge: age, voice, length.

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
            self.engine.check(text, voice, speed)
        except InvalidInputError as error:
            raise RequestRejected(ErrorCode(error.code), error.message) from None

    def start(
        self, text: str, voice: str, speed: float, timestamp: float | None,
        listener: Listener, request_id: str, route: str,
    ) -> SynthesisJob:
        """Validate and queue one request; synthesis starts as soon as the scheduler allows."""
        self.check(text, voice, speed, timestamp)
        try:
            job = self.scheduler.submit(SynthesisJob(text, voice, speed, listener, request_id))
        except BusyError as error:
            raise RequestRejected(ErrorCode.BUSY, str(error)) from None
        self.metrics.requests.labels(route=route).inc()
        return job

    def stream(self, job: SynthesisJob, format: str, sample_rate: int, route: str) -> AudioStream:
        return AudioStream(job, create_encoder(format, sample_rate), self.metrics, route)
