"""One engine, many listeners: which piece of which request the model renders next.

The model renders one piece (a sentence, at most 510 phonemes) per run, single-threaded,
and the scheduler keeps one run per core going. Each free worker takes the most urgent
piece:

1. a request that has produced no audio yet goes before one that has (first-chunk
   priority: one long monologue cannot starve a new session's first word);
2. then the earliest deadline: the moment the listener's buffered audio runs out, assuming
   real-time playback from the first byte; a listener with nothing buffered is due now;
3. then arrival order.

A run cannot be interrupted, so priority alone would still make a new request wait for
the pieces already running. Workers therefore come in two lanes, one worker per core in
each: *first-audio* workers run at normal priority and take only the first piece of each
listener's earliest unfinished request; *steady* workers run at a lower OS priority
(nice +10) and take everything else.
A first piece then starts at once and gets nearly a whole core from the kernel, whatever
else is rendering (see "First audio beside three long monologues" in docs/BENCHMARKS.md).

Thread counts follow the same idea. A steady run uses one thread (runs in parallel use the
cores better than threads inside one run). A first-audio run takes every core unless
another first-audio run holds them (see `voicestream.cpus.CPU_USE`): steady runs and a local
LLM in the process run niced, and while the run's listener hears nothing the LLM pauses
between tokens, so a first chunk is spoken about as fast as on an idle machine; a second
first-audio run at the same time takes one thread.

Pieces of one request are rendered in order; later requests of the same session may be
rendered while earlier ones still render or send (the session keeps the wire order).
A request whose consumer has not taken its audio yet holds at most ``MAX_BUFFERED_PIECES``
rendered pieces: it is skipped until its consumer catches up, so a client that never reads
holds a bounded amount of memory and no worker.

Workers are supervised: a failure in one step fails that request (logged once, with its
traceback and request id) and the worker goes on; a worker that ends anyway is restarted,
and :attr:`SynthesisScheduler.healthy` turns false (``/ping`` answers 503) if it cannot be.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from voicestream.cpus import CPU_USE, lower_thread_priority
from voicestream.engine import KokoroEngine, Piece
from voicestream.protocol import DEFAULT_LANGUAGE

log = logging.getLogger(__name__)

MAX_BUFFERED_PIECES = 2
"""Rendered pieces one request may hold before its consumer takes them."""


class BusyError(Exception):
    """The queue is full: the request is refused at once rather than queued forever."""


class RenderFailed(Exception):
    """The engine failed on this request; the scheduler has logged the cause already."""


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

    @property
    def silent(self) -> bool:
        """Nothing is playing: no audio handed over yet, or all of it played by now."""
        return self.playback_end is None or self.playback_end <= time.monotonic()

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
    language: str = DEFAULT_LANGUAGE
    """What the text is read as: the request's ``lang``, else the voice's language."""
    state: JobState = JobState.QUEUED
    arrival: float = field(default_factory=time.monotonic)
    first_audio_at: float | None = None
    model_seconds: float = 0.0
    audio_seconds: float = 0.0
    seq: int = 0
    rendering: bool = False
    _pieces: Iterator[Piece] | None = None
    _chunks: asyncio.Queue = field(default_factory=lambda: asyncio.Queue(MAX_BUFFERED_PIECES + 3))
    """Rendered pieces, plus at most the end marker, a cancel marker and a failure."""
    _on_taken: Callable[[], None] | None = None

    @property
    def backlog_full(self) -> bool:
        """The consumer has not taken enough of this request's audio for another piece."""
        return self._chunks.qsize() >= MAX_BUFFERED_PIECES

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
            if self._on_taken is not None:
                self._on_taken()
            if item is _SENTINEL:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def _deliver(self, item: object) -> None:
        self._chunks.put_nowait(item)


STEADY_NICENESS = 10


def _lower_priority() -> None:
    """Executor initializer: make this worker thread yield the CPU to first-audio work."""
    lower_thread_priority(STEADY_NICENESS)


class SynthesisScheduler:
    """Runs the engine on a few workers, always on the most urgent piece."""

    def __init__(self, engine: KokoroEngine, max_queue: int = 256, workers: int | None = None) -> None:
        self.engine = engine
        self.max_queue = max_queue
        self.workers = workers or engine.parallel_runs
        self._jobs: list[SynthesisJob] = []
        self._wakeup = asyncio.Condition()
        self._seq = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self.rendered_seconds = 0.0
        """Audio rendered so far, all requests together (a metric)."""
        self._first_audio_pool = ThreadPoolExecutor(self.workers, thread_name_prefix="first-audio")
        self._steady_pool = ThreadPoolExecutor(
            self.workers, thread_name_prefix="steady", initializer=_lower_priority
        )

    @property
    def depth(self) -> int:
        """Requests accepted and not yet fully rendered."""
        return sum(not job.finished for job in self._jobs)

    @property
    def healthy(self) -> bool:
        """Every worker is running: the server can synthesize."""
        return bool(self._tasks) and all(not task.done() for task in self._tasks)

    def start(self) -> None:
        if self._tasks:
            return
        for index in range(self.workers):
            self._tasks.append(self._spawn(f"steady-{index}", first_only=False))
            self._tasks.append(self._spawn(f"first-{index}", first_only=True))

    def _spawn(self, name: str, first_only: bool) -> asyncio.Task[None]:
        pool = self._first_audio_pool if first_only else self._steady_pool
        task = asyncio.get_running_loop().create_task(self._work(pool, first_only), name=name)
        task.add_done_callback(self._restart)
        return task

    def _restart(self, task: asyncio.Task[None]) -> None:
        """A worker ended although nothing stopped it: log why and start a new one."""
        if self._stopping or task.cancelled() or task not in self._tasks:
            return
        log.error("scheduler worker %s ended; restarting it", task.get_name(), exc_info=task.exception())
        index = self._tasks.index(task)
        try:
            self._tasks[index] = self._spawn(task.get_name(), first_only=task.get_name().startswith("first"))
        except RuntimeError:  # the loop is closing: the worker stays dead and /ping says so
            log.exception("scheduler worker %s could not be restarted", task.get_name())

    async def stop(self) -> None:
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for job in self._jobs:
            job.cancel()
        self._jobs.clear()
        self._first_audio_pool.shutdown(wait=False, cancel_futures=True)
        self._steady_pool.shutdown(wait=False, cancel_futures=True)

    def submit(self, job: SynthesisJob) -> SynthesisJob:
        """Queue a request (already validated); raises :class:`BusyError` when the queue is full."""
        if self.depth >= self.max_queue:
            raise BusyError(f"The server has {self.depth} requests waiting; try again shortly.")
        job.seq = next(self._seq)
        job._on_taken = self._wake
        self._jobs.append(job)
        self._wake()
        return job

    def _wake(self) -> None:
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._wakeup:
            self._wakeup.notify_all()

    def _next_job(self, first_only: bool) -> SynthesisJob | None:
        """The most urgent job that no worker is rendering and whose next piece is this lane's.

        A piece is first-audio work when it is the first piece of its listener's earliest
        unfinished request; everything else (later pieces, and requests queued behind
        another of the same listener, whose audio is not due yet) is steady work. A job
        whose consumer is behind (``backlog_full``) waits, and so does a request queued
        behind one of its listener's that has not spoken yet: that one renders on every
        core, and the next is better taken by a first-audio worker (every core) once it
        has spoken than on one niced thread beside it, where it would stay slow to the end
        and leave the listener silent after a short first chunk.
        """
        self._jobs = [job for job in self._jobs if not job.finished]
        heads: dict[int, SynthesisJob] = {}
        for job in self._jobs:
            heads.setdefault(id(job.listener), job)

        def lane_of(job: SynthesisJob) -> bool | None:
            """True: first-audio work; False: steady work; None: not yet."""
            head = heads[id(job.listener)]
            if job is head:
                return job.first_audio_at is None
            return None if head.first_audio_at is None else False

        ready = [
            job for job in self._jobs
            if not job.rendering and not job.backlog_full and lane_of(job) is first_only
        ]
        return min(ready, key=SynthesisJob.urgency, default=None)

    async def _work(self, pool: ThreadPoolExecutor, first_only: bool) -> None:
        loop = asyncio.get_running_loop()
        while True:
            async with self._wakeup:
                await self._wakeup.wait_for(lambda: self._next_job(first_only) is not None)
                job = self._next_job(first_only)
                assert job is not None
                job.rendering = True
            try:
                await self._step(job, loop, pool)
            except Exception as error:  # noqa: BLE001 - the request fails, the worker goes on
                self._fail(job, error)
            finally:
                job.rendering = False
                await self._notify()

    @staticmethod
    def _fail(job: SynthesisJob, error: Exception) -> None:
        """Log the cause once and hand the request's consumer a :class:`RenderFailed`."""
        log.error("synthesis failed", exc_info=error, extra={"request_id": job.request_id})
        if not job.finished:
            job.state = JobState.FAILED
            failure = RenderFailed("Synthesis failed for this request.")
            failure.__cause__ = error
            job._deliver(failure)

    async def _step(self, job: SynthesisJob, loop: asyncio.AbstractEventLoop, pool: ThreadPoolExecutor) -> None:
        """Render the job's next piece on ``pool`` and hand it over."""
        if job._pieces is None:
            job._pieces = self.engine.plan(job.text, job.language, cut_first_clause=job.listener.silent)
            job.state = JobState.SPEAKING
        started = time.perf_counter()
        first_audio = pool is self._first_audio_pool
        rendered = await loop.run_in_executor(pool, self._render_next, job, first_audio)
        if job.finished:  # cancelled while the piece was rendering: drop it
            return
        if rendered is not None:
            audio, last = rendered
            job.model_seconds += time.perf_counter() - started
            seconds = audio.size / self.engine.sample_rate
            job.audio_seconds += seconds
            self.rendered_seconds += seconds
            job.listener.buffered(seconds)
            if job.first_audio_at is None:
                job.first_audio_at = time.monotonic()
            job._deliver(audio)
            if not last:
                return
        job.state = JobState.DONE  # known at once, so the listener's next request is first-audio work
        job._deliver(_SENTINEL)

    def _render_next(self, job: SynthesisJob, first_audio: bool) -> tuple[np.ndarray, bool] | None:
        """The next piece's audio and whether it was the request's last piece; first audio
        gets every core when nothing else holds one."""
        assert job._pieces is not None
        piece = next(job._pieces, None)
        if piece is None:
            return None
        if not first_audio:
            with CPU_USE.holding(1):
                return self.engine.render(piece, job.voice, job.speed, 1), piece.last
        with CPU_USE.claim_urgent(self.engine.max_threads, pause_background=job.listener.silent) as threads:
            return self.engine.render(piece, job.voice, job.speed, threads), piece.last
