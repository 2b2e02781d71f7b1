"""One engine, many listeners: which piece of which request the model renders next.

The model renders one piece (a sentence, at most 510 phonemes) at a time. After each piece
the scheduler picks the next one by urgency:

1. a request that has produced no audio yet goes before one that has (first-chunk
   priority: one long monologue cannot starve a new session's first word);
2. then the earliest deadline: the moment the listener's buffered audio runs out, assuming
   real-time playback from the first byte; a listener with nothing buffered is due now;
3. then arrival order.

Requests of one listener (a session, in order) are rendered in order; the next may start
as soon as the previous one is fully rendered, while its audio is still being sent.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from voicestream.engine import KokoroEngine, Piece


class BusyError(Exception):
    """The queue is full: the request is refused at once rather than queued forever."""


class JobState(Enum):
    QUEUED = "queued"
    SPEAKING = "speaking"
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"


class Listener:
    """The playback clock of one audience (a session or an HTTP response)."""

    def __init__(self) -> None:
        self.playback_end: float | None = None

    def buffered(self, seconds: float) -> None:
        """Record that ``seconds`` of audio were handed to this listener now."""
        now = time.monotonic()
        self.playback_end = max(now, self.playback_end or now) + seconds


_SENTINEL = object()


@dataclass(eq=False)
class SynthesisJob:
    """One request: its pieces go in through the scheduler, its audio comes out of :meth:`audio`."""

    text: str
    voice: str
    speed: float
    listener: Listener
    request_id: str = ""
    state: JobState = JobState.QUEUED
    arrival: float = field(default_factory=time.monotonic)
    first_audio_at: float | None = None
    model_seconds: float = 0.0
    audio_seconds: float = 0.0
    seq: int = 0
    _pieces: Iterator[Piece] | None = None
    _chunks: asyncio.Queue = field(default_factory=asyncio.Queue)

    @property
    def finished(self) -> bool:
        return self.state in (JobState.DONE, JobState.CANCELLED, JobState.FAILED)

    @property
    def deadline(self) -> float:
        end = self.listener.playback_end
        return self.arrival if end is None else max(end, self.arrival)

    def urgency(self) -> tuple[bool, float, int]:
        return (self.first_audio_at is not None, self.deadline, self.seq)

    def cancel(self) -> None:
        """Drop the rest of this request; the consumer sees the end of its audio at once."""
        if not self.finished:
            self.state = JobState.CANCELLED
            self._chunks.put_nowait(_SENTINEL)

    async def audio(self) -> AsyncIterator[np.ndarray]:
        """The request's audio, chunk by chunk; raises what rendering raised."""
        while True:
            item = await self._chunks.get()
            if item is _SENTINEL:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def _deliver(self, item: object) -> None:
        self._chunks.put_nowait(item)


class SynthesisScheduler:
    """Runs the engine on one worker, always on the most urgent piece."""

    def __init__(self, engine: KokoroEngine, max_queue: int = 256) -> None:
        self.engine = engine
        self.max_queue = max_queue
        self._jobs: list[SynthesisJob] = []
        self._wakeup = asyncio.Event()
        self._seq = itertools.count()
        self._worker: asyncio.Task[None] | None = None

    @property
    def depth(self) -> int:
        """Requests accepted and not yet fully rendered."""
        return len(self._jobs)

    def start(self) -> None:
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._run(), name="synthesis-scheduler")

    async def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None
        for job in self._jobs:
            job.cancel()
        self._jobs.clear()

    def submit(self, job: SynthesisJob) -> SynthesisJob:
        """Queue a request (already validated); raises :class:`BusyError` when the queue is full."""
        if len(self._jobs) >= self.max_queue:
            raise BusyError(f"The server has {len(self._jobs)} requests waiting; try again shortly.")
        job.seq = next(self._seq)
        self._jobs.append(job)
        self._wakeup.set()
        return job

    def _next_job(self) -> SynthesisJob | None:
        """The most urgent job among the first unfinished job of each listener."""
        self._jobs = [job for job in self._jobs if not job.finished]
        heads: dict[int, SynthesisJob] = {}
        for job in self._jobs:
            heads.setdefault(id(job.listener), job)
        return min(heads.values(), key=SynthesisJob.urgency, default=None)

    async def _run(self) -> None:
        while True:
            job = self._next_job()
            if job is None:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            await self._step(job)

    async def _step(self, job: SynthesisJob) -> None:
        """Render the job's next piece in a worker thread and hand it over."""
        if job._pieces is None:
            job._pieces = self.engine.plan(job.text)
            job.state = JobState.SPEAKING
        started = time.perf_counter()
        try:
            audio = await asyncio.to_thread(self._render_next, job)
        except Exception as error:  # noqa: BLE001 - handed to the request's consumer, never lost
            if not job.finished:
                job.state = JobState.FAILED
                job._deliver(error)
                job._deliver(_SENTINEL)
            return
        if job.finished:  # cancelled while the piece was rendering: drop it
            return
        if audio is None:
            job.state = JobState.DONE
            job._deliver(_SENTINEL)
            return
        job.model_seconds += time.perf_counter() - started
        seconds = audio.size / self.engine.sample_rate
        job.audio_seconds += seconds
        job.listener.buffered(seconds)
        if job.first_audio_at is None:
            job.first_audio_at = time.monotonic()
        job._deliver(audio)

    def _render_next(self, job: SynthesisJob) -> np.ndarray | None:
        assert job._pieces is not None
        piece = next(job._pieces, None)
        return None if piece is None else self.engine.render(piece, job.voice, job.speed)
