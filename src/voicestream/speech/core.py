"""The speech core: what every face shares, and its one entry, `SpeechCore.start`.

Every face (the session, ``/invocations``, OpenAI, captioned, Cartesia, ElevenLabs, Deepgram,
Wyoming) differs only in framing: each asks for speech with `start`, a text read in a
:class:`Voice` and sent as an :class:`Output`; admission, validation, scheduling, encoding
and metrics live here once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass

from voicestream.audio import AudioError, StreamEncoder, create_encoder
from voicestream.cpus import CPU_USE
from voicestream.edge.connection import Connection, EdgeLimits
from voicestream.engine import (
    DEFAULT_VOICE,
    EmptyTextError,
    InvalidInputError,
    InvalidMarkupError,
    InvalidSpeedError,
    InvalidVoiceBlendError,
    KokoroEngine,
    TextTooLongError,
    UnknownVoiceError,
    UnsupportedLanguageError,
)
from voicestream.engine.cache import cache_root
from voicestream.protocol import (
    ErrorCode,
    SpeechFault,
    SynthesisComplete,
    SynthesisStart,
    http_status,
)
from voicestream.speech.dictionaries import DictionaryError, PronunciationDictionaries
from voicestream.speech.job import (
    JobFailed,
    JobState,
    Listener,
    RenderedChunk,
    RequestRejected,
    SynthesisJob,
)
from voicestream.speech.metrics import ServerMetrics
from voicestream.speech.policy import Budgets
from voicestream.speech.scheduler import SynthesisScheduler
from voicestream.speech.settings import ServerSettings
from voicestream.text.lexicon import Lexicon

log = logging.getLogger(__name__)

__all__ = [
    "AudioStream", "Output", "RequestRejected", "SpeechCore", "SpeechFault", "StreamResult",
    "SynthesisFailed", "Voice", "http_status",
]

SynthesisFailed = JobFailed
"""The request ended without all its audio: the scheduler's `JobFailed` under the name the
routes have used (a `SpeechFault`, like every error raised here)."""

ENGINE_REFUSALS: Mapping[type[InvalidInputError], ErrorCode] = {
    EmptyTextError: ErrorCode.TEXT_REQUIRED,
    TextTooLongError: ErrorCode.TEXT_TOO_LONG,
    UnknownVoiceError: ErrorCode.UNKNOWN_VOICE,
    InvalidSpeedError: ErrorCode.INVALID_SPEED,
    UnsupportedLanguageError: ErrorCode.UNSUPPORTED_LANGUAGE,
    InvalidVoiceBlendError: ErrorCode.INVALID_VOICE_BLEND,
    InvalidMarkupError: ErrorCode.INVALID_MARKUP,
}
"""The protocol's code for each refusal of the engine's checks (the engine knows no wire)."""


def refused(error: InvalidInputError) -> RequestRejected:
    """The engine's refusal of a request as this server answers it: its code, the engine's message."""
    return RequestRejected(ENGINE_REFUSALS[type(error)], error.message)


@dataclass(frozen=True)
class Voice:
    """How a text is read: a voice or blend, its speed, and the language that overrides the
    voice's own (None: the voice's)."""

    voice: str
    speed: float
    language: str | None
    dictionaries: tuple[str, ...] = ()
    """Ids of uploaded pronunciation dictionaries applied to the text (`voicestream.speech.dictionaries`)."""


@dataclass(frozen=True)
class Output:
    """The audio a text is sent as: a protocol ``format`` at ``sample_rate``, or the stream
    ``encoder`` makes (a format the protocol lacks: Cartesia's ``pcm_f32le``, mp3 at a chosen
    bit rate); ``word_timestamps`` times each piece's words (`RenderedChunk.words`)."""

    format: str
    sample_rate: int
    encoder: Callable[[], StreamEncoder] | None = None
    word_timestamps: bool = False


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
    """A job's audio as wire bytes (encoded by the worker that rendered each piece).

    Reading its `chunks` consumes the job: however the reading ends, the job ends with it and
    its queue slot and bytes are freed (`SynthesisJob.audio`); a failure raises `SynthesisFailed`,
    a cancel just ends it."""

    def __init__(self, job: SynthesisJob, metrics: ServerMetrics, route: str) -> None:
        assert job.encoder is not None
        self.job = job
        self.encoder = job.encoder
        self.metrics = metrics
        self.route = route
        self.result: StreamResult | None = None

    def start_frame(self, request_id: str) -> SynthesisStart:
        return SynthesisStart(request_id=request_id, format=self.encoder.format, sample_rate=self.encoder.sample_rate)

    async def chunks(self) -> AsyncIterator[RenderedChunk]:
        """The encoded audio piece by piece, with each piece's words (if asked for)."""
        sent = 0
        first_audio_ms: float | None = None
        async with contextlib.aclosing(self.job.audio()) as chunks:  # raises JobFailed, logged already
            async for chunk in chunks:
                if first_audio_ms is None and chunk.seconds:
                    first_audio_ms = (time.monotonic() - self.job.arrival) * 1000
                    self.metrics.time_to_first_audio.labels(route=self.route).observe(first_audio_ms / 1000)
                sent += len(chunk.data)
                yield chunk
        if self.job.state is not JobState.DONE:
            return
        if self.job.audio_seconds:
            self.metrics.real_time_factor.observe(self.job.model_seconds / self.job.audio_seconds)
        self.result = StreamResult(
            audio_bytes=sent,
            total_duration_s=self.job.audio_seconds,
            elapsed_s=time.monotonic() - self.job.arrival,
            first_audio_ms=first_audio_ms,
        )


class SpeechCore:
    """The speech server's core: the engine, its scheduler, the limits and the metrics, and
    the one entry every face asks for speech through (`start`)."""

    def __init__(
        self, engine: KokoroEngine, settings: ServerSettings, metrics: ServerMetrics,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.metrics = metrics
        self.on_change = on_change
        """Told when a connection may have become idle (the drain's wake-up)."""
        self.dictionaries = PronunciationDictionaries(
            settings.dictionaries_dir or cache_root() / "pronunciation-dictionaries"
        )
        """The pronunciation dictionaries clients uploaded (ElevenLabs', Cartesia's routes)."""
        self.scheduler = SynthesisScheduler(engine, Budgets(
            max_queue=settings.max_queue,
            max_sessions=settings.max_sessions,
            listener_budget_bytes=settings.listener_budget_bytes,
            buffer_budget_bytes=settings.buffer_budget_bytes,
            stale_after_s=settings.stale_after_s,
        ))
        self.connections: set[Connection] = set()
        """The open persistent connections, every face's (the edge adds and removes them)."""
        self.draining = False
        """Set on SIGTERM: new sessions and requests are refused with ``busy``."""
        self._sessions = 0
        self.whole_files = 0
        """``stream: false`` responses being collected (each holds its whole file in memory)."""
        self.scheduler.on_end = lambda job: metrics.requests_ended.labels(state=job.state.value).inc()
        self.scheduler.on_reap = lambda job, state: metrics.jobs_reaped.labels(state=state.value).inc()
        metrics.queue_depth.set_function(lambda: self.scheduler.depth)
        metrics.rendered_audio.set_function(lambda: self.scheduler.rendered_seconds)
        metrics.buffered_bytes.set_function(lambda: self.scheduler.held_bytes)
        metrics.peak_listener_bytes.set_function(lambda: self.scheduler.peak_listener_bytes)
        metrics.rendering_pieces.set_function(lambda: self.scheduler.rendering)
        metrics.memory_settled.set_function(lambda: float(engine.idle_release.settled))
        metrics.session_renewals.set_function(lambda: float(engine.idle_release.renewals))
        metrics.moved_pieces.set_function(lambda: self.scheduler.moved_pieces)
        metrics.stopped_runs.set_function(lambda: self.scheduler.stopped_runs)
        metrics.interrupted_runs.set_function(lambda: CPU_USE.interrupted)

    @property
    def drained(self) -> bool:
        """Nothing accepted is left to render or to send."""
        return self.scheduler.depth == 0 and all(connection.idle for connection in self.connections)

    # --- the edge's admission protocol (`voicestream.edge.connection.Host`) ---------------

    @property
    def edge_limits(self) -> EdgeLimits:
        settings = self.settings
        return EdgeLimits(settings.send_timeout_s, settings.idle_timeout_s, settings.max_session_errors)

    def count_error(self, code: str) -> None:
        self.metrics.errors.labels(code=code).inc()

    def count_close(self, code: int) -> None:
        self.metrics.sessions_closed.labels(code=str(code)).inc()

    def changed(self) -> None:
        self.on_change()

    def admit_connection(self) -> Listener | None:
        """A new connection's listener, holding its reserve of queue slots; None when full."""
        if self._sessions >= self.settings.max_sessions:
            return None
        self._sessions += 1
        self.metrics.active_sessions.set(self._sessions)
        reserve = self.scheduler.budgets.reserved_per_session
        self.scheduler.reserved_slots += reserve
        return Listener(reserved_slots=reserve)

    def release_connection(self, listener: Listener) -> None:
        """The connection is over: its slots go back, and its listener closes (the reaper ends any
        request of it the connection left behind)."""
        listener.close()
        self._sessions -= 1
        self.scheduler.reserved_slots -= listener.reserved_slots
        self.metrics.active_sessions.set(self._sessions)

    @property
    def max_text_chars(self) -> int:
        """The longest text one request may have (longer is refused ``text_too_long``)."""
        return self.engine.max_text_chars

    def check(self, text: str, voice: Voice) -> str:
        """Raise :class:`RequestRejected` for what only the server can judge: voice, length;
        return the language the text will be read in.

        Format, sample rate and field types were already checked by the protocol layer's
        parsers, which answer with their own codes. A client's ``request_timestamp`` is not
        compared with this server's clock (the two clocks may be far apart): staleness is
        the time a request waits here, measured by the scheduler.
        """
        try:
            self.engine.check(text, voice.voice, voice.speed, voice.language, self.lexicon_for(voice))
            return self.engine.language_for(voice.voice, voice.language)
        except InvalidInputError as error:
            raise refused(error) from None

    async def phonemize(self, text: str, language: str) -> tuple[str, list[int]]:
        """The phonemes and token ids the model would receive for ``text`` read in ``language``
        (the server's lexicons and the text's markup applied); G2P runs in a worker thread.
        Raises :class:`RequestRejected` for a text or language the engine refuses."""
        try:
            spoken = self.engine.language_for(DEFAULT_VOICE, language)
            self.engine.check(text, DEFAULT_VOICE, 1.0, spoken)
        except InvalidInputError as error:
            raise refused(error) from None
        phonemes = await asyncio.to_thread(self.engine.phonemes, text, spoken)
        return phonemes, self.engine.tokens(phonemes)

    def lexicon_for(self, voice: Voice) -> Lexicon | None:
        """The pronunciation dictionaries ``voice`` names, as one lexicon; raises
        :class:`RequestRejected` (``invalid_message``) for one this server does not have."""
        try:
            return self.dictionaries.lexicon(voice.dictionaries)
        except DictionaryError as error:
            raise RequestRejected(ErrorCode.INVALID_MESSAGE, error.message) from None

    def check_voice(self, voice: str, speed: float, language: str | None = None) -> None:
        """Raise :class:`RequestRejected` for a voice, speed or language the engine cannot
        speak (a Cartesia context or a Wyoming stream checks this when it opens)."""
        try:
            self.engine.check_voice(voice, speed, language)
        except InvalidInputError as error:
            raise refused(error) from None

    def start(
        self, text: str, voice: Voice, output: Output, listener: Listener, request_id: str, route: str
    ) -> SynthesisJob:
        """Validate and queue one request, ``text`` read in ``voice`` and sent as ``output``, for
        ``listener``; synthesis starts as soon as the scheduler allows. The one way into the core.

        Everything is built before the job is submitted (the encoder included), so a refusal
        of any kind (:class:`RequestRejected`: busy, draining, the engine's checks, an encoder
        that cannot start) leaves nothing queued. Once this returns, the job is the caller's:
        its audio must be iterated (`stream`) or the job cancelled, and the listener closed
        when the route ends (`request` does both)."""
        if self.draining:
            raise RequestRejected(ErrorCode.BUSY, "The server is shutting down; try another instance.")
        spoken_language = self.check(text, voice)
        encoder = _build_encoder(output)
        job = SynthesisJob(text, voice.voice, voice.speed, listener, request_id, spoken_language, encoder,
                           output.word_timestamps, self.lexicon_for(voice))
        self.scheduler.submit(job)  # BusyError is a RequestRejected
        self.metrics.requests.labels(route=route).inc()
        return job

    @contextlib.asynccontextmanager
    async def request(
        self, text: str, voice: Voice, output: Output, request_id: str, route: str
    ) -> AsyncIterator[AudioStream]:
        """One request on a listener of its own, owned by the block: ``start`` on entry (a
        refusal raises before anything is queued), and on exit, however the block ends, the
        job is cancelled (a no-op once its audio is all out) and the listener closed."""
        listener = Listener()
        try:
            job = self.start(text, voice, output, listener, request_id, route)
            try:
                yield self.stream(job, route)
            finally:
                job.cancel()
        finally:
            listener.close()

    def stream(self, job: SynthesisJob, route: str) -> AudioStream:
        return AudioStream(job, self.metrics, route)


def _build_encoder(output: Output) -> StreamEncoder:
    """The request's encoder, made now: an encoder that cannot start with what was asked (an
    FFmpeg codec refusing a bit rate or rate, a number too large for it) refuses the request
    (``unsupported_format``) before it is queued."""
    try:
        return create_encoder(output.format, output.sample_rate) if output.encoder is None else output.encoder()
    except AudioError as error:
        raise RequestRejected(ErrorCode.UNSUPPORTED_FORMAT, str(error)) from error
    except (ValueError, OverflowError) as error:  # FFmpeg's own checks of its parameters
        raise RequestRejected(
            ErrorCode.UNSUPPORTED_FORMAT, f"The {output.format} encoder cannot start with these settings: {error}."
        ) from error
