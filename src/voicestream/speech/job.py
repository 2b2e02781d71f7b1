"""One request's lifecycle, guarded in one place: queued → speaking → done | cancelled | failed.

A request holds its place in the server (a queue slot, and the bytes of its rendered audio
that are not sent yet) until its audio has been *sent* or it ended otherwise. The route that
consumes a request (`SynthesisJob.audio`) ends it when it stops consuming for any reason:
reading to the end makes it DONE; stopping early (a client gone, a cancel, a failure to send)
makes it CANCELLED. So a request whose connection is gone ends, whatever state it was in.

Workers put rendered, already encoded chunks in with `deliver`; everything here runs on the
event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from enum import Enum

from voicestream.audio import StreamEncoder
from voicestream.engine.alignment import TimedWord
from voicestream.protocol import DEFAULT_LANGUAGE, SpeechFault
from voicestream.text.lexicon import Lexicon


class JobState(Enum):
    QUEUED = "queued"
    SPEAKING = "speaking"
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"


_NEXT_STATES = {
    JobState.QUEUED: frozenset({JobState.SPEAKING, JobState.DONE, JobState.CANCELLED, JobState.FAILED}),
    JobState.SPEAKING: frozenset({JobState.DONE, JobState.CANCELLED, JobState.FAILED}),
}
"""The transitions a request may take; the three final states have none."""


class RequestRejected(SpeechFault):
    """A request refused before any audio (the server is busy or draining, the engine
    refused its text or voice, its encoder cannot start): nothing of it was queued."""


class JobFailed(SpeechFault):
    """The request ended without all its audio (the engine or the encoder failed, or it went
    stale in the queue); ``code`` is the protocol's, the message for people. The cause,
    where there is one, has been logged once already. (``SynthesisFailed`` in
    `voicestream.speech.core` is this class.)"""


class Listener:
    """One audience (a session or an HTTP response): its playback clock, and the rendered
    audio it holds that its route has not sent yet.

    Its route closes it (`close`) when it ends, however it ends (a connection released, an
    HTTP response sent, dropped or never started): from then on nobody will take its audio,
    and the scheduler's reaper ends any request of it still queued, parked by its budget or
    speaking (`SynthesisScheduler.reap`)."""

    def __init__(self, reserved_slots: int = 0) -> None:
        self.playback_end: float | None = None
        self.held_bytes = 0
        self.reserved_slots = reserved_slots
        """Queue slots kept for this listener whatever others queue (a session's share)."""
        self.gone = False
        """Its route has ended (`close`): its requests have no consumer left."""
        self.on_gone: Callable[[], None] | None = None
        """Called once by `close` (the scheduler wakes its reaper); must be safe from any thread."""

    def close(self) -> None:
        """The route is done with this listener. Idempotent, and safe from any thread (a
        finalizer may call it): it only marks the listener and tells the scheduler."""
        if self.gone:
            return
        self.gone = True
        if self.on_gone is not None:
            self.on_gone()

    @property
    def silent(self) -> bool:
        """Nothing is playing: no audio handed over yet, or all of it played by now."""
        return self.playback_end is None or self.playback_end <= time.monotonic()

    def left_to_play(self) -> float:
        """Seconds of handed-over audio not yet played by now (0 when silent)."""
        return 0.0 if self.playback_end is None else max(0.0, self.playback_end - time.monotonic())

    def buffered(self, seconds: float) -> None:
        """Record that ``seconds`` of audio were handed to this listener now."""
        now = time.monotonic()
        self.playback_end = max(now, self.playback_end or now) + seconds


@dataclass(frozen=True)
class RenderedChunk:
    """One piece's audio, encoded in the request's format by the worker that rendered it,
    and its words (when the request asked), timed from the start of the request's audio."""

    data: bytes
    seconds: float
    words: tuple[TimedWord, ...] = ()


class SynthesisJob:
    """One request: pieces go in through the scheduler, encoded audio comes out of `audio`."""

    def __init__(
        self,
        text: str,
        voice: str,
        speed: float,
        listener: Listener,
        request_id: str = "",
        language: str = DEFAULT_LANGUAGE,
        encoder: StreamEncoder | None = None,
        word_timestamps: bool = False,
        lexicon: Lexicon | None = None,
    ) -> None:
        self.text = text
        self.voice = voice
        self.speed = speed
        self.listener = listener
        self.request_id = request_id
        self.language = language
        """What the text is read as: the request's ``lang``, else the voice's language."""
        self.encoder = encoder
        """Turns each rendered piece into wire bytes, in the worker; None: pcm16 at 24 kHz."""
        self.word_timestamps = word_timestamps
        self.lexicon = lexicon
        """The request's pronunciation dictionaries as one lexicon (None: the server's lexicons only)."""
        self.state = JobState.QUEUED
        self.arrival = time.monotonic()
        self.due_since = self.arrival
        """When the listener's requests before this one were all rendered (its wait starts)."""
        self.model_seconds = 0.0
        self.audio_seconds = 0.0
        self.piece_start_s = 0.0
        """Where the piece being handed over starts in the request's audio: the scheduler
        re-bases the engine's word times (from the piece's start) by it, once."""
        self.seq = 0
        self.rendering = False
        self.rendered_all = False
        """Every piece (and the encoder's tail) has been delivered."""
        self.pieces: object | None = None
        """The engine's plan (an iterator of pieces), made when the first piece renders."""
        self.upcoming: object | None = None
        """The plan's next piece, taken by the worker that rendered the one before it (so
        that the scheduling policy knows its length)."""
        self.unfinished: object | None = None
        """A windowed piece a worker left after a part, for the next worker to finish (the
        scheduler's `_Unfinished`)."""
        self.held_bytes = 0
        self._chunks: deque[RenderedChunk] = deque()
        self._failure: JobFailed | None = None
        self._changed = asyncio.Event()
        self.on_change: Callable[[], None] | None = None
        """Called when the request frees budget or ends (the scheduler wakes its workers)."""
        self.on_end: Callable[[SynthesisJob], None] | None = None
        """Called once, when the request reaches a final state (metrics)."""

    @property
    def finished(self) -> bool:
        return self.state in (JobState.DONE, JobState.CANCELLED, JobState.FAILED)

    # --- transitions -----------------------------------------------------------------

    def _move(self, state: JobState) -> bool:
        """Take the transition if it is allowed from the current state; say whether it was."""
        if state not in _NEXT_STATES.get(self.state, ()):
            return False
        self.state = state
        if self.finished:
            self._release(self.held_bytes)
            self._chunks.clear()
            if self.on_end is not None:
                self.on_end(self)
        self._changed.set()
        if self.on_change is not None:
            self.on_change()
        return True

    def start_speaking(self) -> None:
        self._move(JobState.SPEAKING)

    def cancel(self) -> None:
        """Drop the rest of this request; its consumer sees the end of its audio at once."""
        self._move(JobState.CANCELLED)

    def fail(self, failure: JobFailed) -> None:
        """End the request with ``failure``; its consumer gets the chunks delivered before it."""
        if not self.finished:
            self._failure = failure
            self.rendered_all = True
            self._changed.set()

    def deliver(self, chunk: RenderedChunk | None, last: bool) -> None:
        """A worker's piece (None: nothing to add), counted against the listener's budget."""
        if self.finished:
            return
        if chunk is not None and chunk.data:
            self._chunks.append(chunk)
            self.held_bytes += len(chunk.data)
            self.listener.held_bytes += len(chunk.data)
        self.rendered_all = last
        self._changed.set()

    def _release(self, size: int) -> None:
        self.held_bytes -= size
        self.listener.held_bytes -= size
        if self.on_change is not None:
            self.on_change()

    # --- consuming -------------------------------------------------------------------

    async def audio(self) -> AsyncIterator[RenderedChunk]:
        """The request's chunks in order; a chunk's bytes stay counted until the consumer asks
        for the next one (it has sent it by then). Raises `JobFailed`. However the consumer
        stops, the request ends: DONE after the last chunk, else CANCELLED."""
        try:
            while True:
                if self.state is JobState.CANCELLED:
                    return
                if self._chunks:
                    chunk = self._chunks.popleft()
                    yield chunk
                    if not self.finished:
                        self._release(len(chunk.data))
                    continue
                if self._failure is not None:
                    self._move(JobState.FAILED)
                    raise self._failure
                if self.rendered_all:
                    self._move(JobState.DONE)
                    return
                self._changed.clear()
                await self._changed.wait()
        finally:
            self.cancel()
