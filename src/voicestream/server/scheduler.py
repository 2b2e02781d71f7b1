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
listener's earliest unrendered request; *steady* workers run at a lower OS priority
(nice +10) and take everything else.
A first piece then starts at once and gets nearly a whole core from the kernel, whatever
else is rendering (see "First audio beside three long monologues" in docs/BENCHMARKS.md).

Thread counts follow the same idea. A steady run uses one thread (runs in parallel use the
cores better than threads inside one run). A first-audio run takes every core unless
another first-audio run holds them (see `voicestream.cpus.CPU_USE`): steady runs and a local
LLM in the process run niced, and while the run's listener hears nothing the LLM pauses
between tokens, so a first chunk is spoken about as fast as on an idle machine; a second
first-audio run at the same time takes one thread.

The scheduler owns every budget of the server (docs/RELIABILITY.md), so that no route can
hold memory the others do not see:

- **queue slots**: a request holds one from `submit` until its audio is sent or it ended
  (`voicestream.server.job`). A session reserves ``max_queue // max_sessions`` slots for
  itself, so sessions that never read cannot fill the queue for the others; beyond its
  reserve a request takes a shared slot if one is left, else it is refused (`BusyError`).
- **bytes**: a piece's audio is encoded by the worker that rendered it (never on the event
  loop), and its bytes count against its listener until the route has sent them. A
  listener renders its next piece only while it holds less than its share
  (``listener_budget_bytes``, or less when the server-wide ``buffer_budget_bytes`` is split
  between more listeners), or while it holds nothing at all (or holds only audio of later
  requests while the one being sent has nothing left): a client that never reads holds at
  most one share plus one piece per worker and no worker, and a client that reads is
  never held back by the ones that do not.

A piece is vocoded window by window (`voicestream.engine.vocoder`: its first part comes
after a fraction of its render) when its listener would run out of audio before a whole
render of it ends: a silent listener's first piece (the engine's plan), and any piece whose
predicted render (`voicestream.server.pace`, from this server's own runs) is longer than
what its listener has left to play. Other pieces render whole: windows cost more CPU.
A first-audio worker windowing a piece whose audio has started leaves the rest of it to a
steady worker (one thread, niced) as soon as another listener's first piece waits for a
first-audio worker (`first_audio_waiting`): else a new session beside a few monologues
would wait for their first pieces' last windows, its listener in silence while theirs
already hear speech. With no one waiting, the piece's windows stay on every core.

Pieces of one request are rendered in order; later requests of the same session may be
rendered while earlier ones still render or send (the session keeps the wire order).

A request that waits for its first piece longer than ``stale_after_s`` on the server's clock
(counted from when its listener's earlier requests were all rendered) fails with
``request_stale`` rather than speak long after it was wanted.

A **reaper** (one task beside the workers, every ``REAP_INTERVAL_S`` and whenever a listener
closes) ends every request whose listener is gone (`Listener.close`: its route ended, so
nobody will take its audio), whatever its state: queued, parked by its budget, speaking, or
rendered and unsent. Each is counted (`reaped`, ``voicestream_jobs_reaped_total``): a route
that ends its own requests leaves nothing to reap, so the count is the leaks caught. The
reaper also fails a request that has waited past ``stale_after_s`` for its first piece
without a worker picking it (a request parked by its budget is never picked).

Workers are supervised: a failure in one step fails that request (logged once, with its
traceback and request id) and the worker goes on; a worker that ends anyway is restarted,
and :attr:`SynthesisScheduler.healthy` turns false (``/ping`` answers 503) if it cannot be.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from voicestream import limits
from voicestream.cpus import CPU_USE, lower_thread_priority
from voicestream.engine import KokoroEngine, Piece, RenderedPiece
from voicestream.engine.alignment import offset_words
from voicestream.protocol import ErrorCode, WordTiming
from voicestream.server.job import (
    JobFailed,
    JobState,
    Listener,
    RenderedChunk,
    RequestRejected,
    SynthesisJob,
)
from voicestream.server.pace import RenderPace

__all__ = [
    "Budgets", "BusyError", "JobFailed", "JobState", "Listener", "RenderFailed", "RenderedChunk", "RequestRejected",
    "SynthesisJob", "SynthesisScheduler",
]

log = logging.getLogger(__name__)


class BusyError(RequestRejected):
    """No queue slot is left for this request: it is refused at once (``busy``) rather than
    queued forever."""

    def __init__(self, message: str, request_id: str | None = None) -> None:
        super().__init__(ErrorCode.BUSY, message, request_id)


class RenderFailed(JobFailed):
    """The engine or the encoder failed on this request; the cause is logged already."""

    def __init__(self, message: str = "Synthesis failed for this request.") -> None:
        super().__init__(ErrorCode.INTERNAL, message)


@dataclass(frozen=True)
class Budgets:
    """The limits the scheduler enforces (defaults: `voicestream.limits`, as `ServerSettings`)."""

    max_queue: int = limits.MAX_QUEUE
    max_sessions: int = limits.MAX_SESSIONS
    listener_budget_bytes: int = limits.LISTENER_BUDGET_BYTES
    buffer_budget_bytes: int = limits.BUFFER_BUDGET_BYTES
    stale_after_s: float = limits.STALE_AFTER_S

    @property
    def reserved_per_session(self) -> int:
        return max(1, self.max_queue // max(1, self.max_sessions))

STEADY_NICENESS = 10
REAP_INTERVAL_S = 1.0
"""How often the reaper looks for requests whose listener is gone or that went stale unpicked
(it also looks at once when a listener closes)."""


def _lower_priority() -> None:
    """Executor initializer: make this worker thread yield the CPU to first-audio work."""
    lower_thread_priority(STEADY_NICENESS)


class SynthesisScheduler:
    """Runs the engine on a few workers, always on the most urgent piece, within the budgets."""

    def __init__(
        self, engine: KokoroEngine, budgets: Budgets | None = None, workers: int | None = None
    ) -> None:
        self.engine = engine
        self.budgets = budgets or Budgets()
        self.workers = workers or engine.parallel_runs
        self._jobs: list[SynthesisJob] = []
        self._wakeup = asyncio.Condition()
        self._seq = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._wake_pending = False
        self.on_end: Callable[[SynthesisJob], None] | None = None
        """Told of every request that ends (the service counts them by final state)."""
        self.reserved_slots = 0
        """Slots the open sessions hold in reserve (the service keeps it as sessions come and go)."""
        self.rendered_seconds = 0.0
        """Audio rendered so far, all requests together (a metric)."""
        self.rendering = 0
        """Pieces being rendered right now (a metric)."""
        self.peak_listener_bytes = 0
        """The most rendered, unsent audio one listener has held (a metric: the budget's proof)."""
        self.moved_pieces = 0
        """Windowed pieces a first-audio worker left to a steady one for a waiting listener (a metric)."""
        self.reaped = 0
        """Requests the reaper ended because their listener was gone (a metric: leaks caught)."""
        self.on_reap: Callable[[SynthesisJob, JobState], None] | None = None
        """Told of every request the reaper ends, with the state it was in (the service counts them)."""
        self._reaper: asyncio.Task[None] | None = None
        self._reap_wanted = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.first_audio_waiting = False
        """A first piece waits and every first-audio worker is busy (set on the loop, read
        by the workers between windows)."""
        self._idle_first_workers = 0
        self.pace = RenderPace()
        """How long renders take here: whether a listener would run dry before a piece renders whole."""
        self._first_audio_pool = ThreadPoolExecutor(self.workers, thread_name_prefix="first-audio")
        self._steady_pool = ThreadPoolExecutor(
            self.workers, thread_name_prefix="steady", initializer=_lower_priority
        )

    @property
    def max_queue(self) -> int:
        return self.budgets.max_queue

    @property
    def depth(self) -> int:
        """Requests accepted whose audio is not sent yet (rendering, waiting or sending)."""
        return sum(not job.finished for job in self._jobs)

    @property
    def held_bytes(self) -> int:
        """Rendered audio not sent yet, all requests together (bytes, as encoded)."""
        return sum(job.held_bytes for job in self._jobs if not job.finished)

    @property
    def parked(self) -> bool:
        """Nothing renders and nothing may: every request left waits for its listener to
        take audio (or for a request ahead of it)."""
        return self.rendering == 0 and self._next_job(True) is None and self._next_job(False) is None

    @property
    def healthy(self) -> bool:
        """Every worker and the reaper are running: the server can synthesize."""
        workers = bool(self._tasks) and all(not task.done() for task in self._tasks)
        return workers and self._reaper is not None and not self._reaper.done()

    def start(self) -> None:
        if self._tasks:
            return
        self._loop = asyncio.get_running_loop()
        for index in range(self.workers):
            self._tasks.append(self._spawn(f"steady-{index}", first_only=False))
            self._tasks.append(self._spawn(f"first-{index}", first_only=True))
        self._reaper = self._loop.create_task(self._reap_loop(), name="reaper")

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
        reaper = [self._reaper] if self._reaper is not None else []
        for task in [*self._tasks, *reaper]:
            task.cancel()
        await asyncio.gather(*self._tasks, *reaper, return_exceptions=True)
        self._tasks.clear()
        for job in self._jobs:
            job.cancel()
        self._jobs.clear()
        self._first_audio_pool.shutdown(wait=False, cancel_futures=True)
        self._steady_pool.shutdown(wait=False, cancel_futures=True)

    # --- admission -------------------------------------------------------------------

    def submit(self, job: SynthesisJob) -> SynthesisJob:
        """Queue a request (already validated); raises `BusyError` when its listener's reserve
        and the shared slots are all taken."""
        self._prune()
        own = [other for other in self._jobs if other.listener is job.listener]
        if len(own) >= job.listener.reserved_slots and self._shared_slots_left() <= 0:
            raise BusyError(f"The server has {self.depth} requests waiting; try again shortly.")
        if all(other.rendered_all for other in own):
            job.due_since = time.monotonic()
        job.seq = next(self._seq)
        job.on_change = self._wake
        job.on_end = self.on_end
        job.listener.on_gone = self._reap_soon
        self._jobs.append(job)
        self._wake()
        if job.listener.gone:  # its route ended already: nobody will take it
            self._reap_soon()
        return job

    def _shared_slots_left(self) -> int:
        """Slots beyond every listener's reserve: ``max_queue`` less the reserves of the open
        sessions, less the requests queued beyond their own listener's reserve."""
        counts: dict[int, list] = {}
        for job in self._jobs:
            counts.setdefault(id(job.listener), [job.listener, 0])[1] += 1
        beyond = sum(max(0, count - listener.reserved_slots) for listener, count in counts.values())
        return self.max_queue - self.reserved_slots - beyond

    def _prune(self) -> None:
        self._jobs = [job for job in self._jobs if not job.finished]

    def _wake(self) -> None:
        """Let the workers look again (coalesced: one notification per loop turn)."""
        if self._wake_pending or self._stopping:
            return
        self._wake_pending = True
        asyncio.get_running_loop().call_soon(self._schedule_notify)

    def _schedule_notify(self) -> None:
        self._wake_pending = False
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._wakeup:
            self._note_first_audio_waiting()
            self._wakeup.notify_all()

    def _note_first_audio_waiting(self) -> None:
        """Whether a first piece waits with no first-audio worker free to take it (on the loop)."""
        self.first_audio_waiting = self._idle_first_workers == 0 and self._next_job(True) is not None

    # --- reaping --------------------------------------------------------------------

    def _reap_soon(self) -> None:
        """Wake the reaper (a listener closed); safe from any thread, a no-op once stopped."""
        if self._loop is None or self._stopping:
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing is left to reap
            self._loop.call_soon_threadsafe(self._reap_wanted.set)

    async def _reap_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(REAP_INTERVAL_S):
                    await self._reap_wanted.wait()
            self._reap_wanted.clear()
            try:
                self.reap()
            except Exception:  # the reaper goes on; the next pass tries again
                log.exception("the reaper failed on one pass")

    def reap(self) -> int:
        """End every request whose listener is gone, whatever its state, and fail with
        ``request_stale`` every request that waited past ``stale_after_s`` for its first
        piece with no worker picking it. Returns how many requests were reaped."""
        now = time.monotonic()
        reaped = 0
        waiting: set[int] = set()
        """Listeners with a request not yet rendered: the requests behind it are not due."""
        for job in list(self._jobs):
            if job.finished:
                continue
            if job.listener.gone:
                state = job.state
                job.cancel()
                reaped += 1
                log.warning("reaped a %s request whose listener was gone", state.value,
                            extra={"request_id": job.request_id})
                if self.on_reap is not None:
                    self.on_reap(job, state)
                continue
            due = id(job.listener) not in waiting
            if not job.rendered_all:
                waiting.add(id(job.listener))
            if due and job.pieces is None and not job.rendering and not job.rendered_all:
                waited = now - job.due_since
                if waited > self.budgets.stale_after_s:
                    job.fail(self._stale(waited))
        self.reaped += reaped
        self._prune()
        return reaped

    def _stale(self, waited: float) -> JobFailed:
        return JobFailed(
            ErrorCode.REQUEST_STALE,
            f"The request waited {waited:.1f} s for the engine; requests that wait longer "
            f"than {self.budgets.stale_after_s:g} s are dropped.",
        )

    # --- choosing --------------------------------------------------------------------

    def share(self, listeners: int) -> int:
        """What one listener may hold of rendered, unsent audio with ``listeners`` active."""
        return min(self.budgets.listener_budget_bytes, self.budgets.buffer_budget_bytes // max(1, listeners))

    def _next_job(self, first_only: bool) -> SynthesisJob | None:
        """The most urgent job that no worker is rendering, whose listener is within its
        budget, and whose next piece is this lane's.

        A piece is first-audio work when it is the first piece of its listener's earliest
        unrendered request; everything else (later pieces, and requests queued behind
        another of the same listener, whose audio is not due yet) is steady work. A request
        queued behind one of its listener's whose first piece is not yet rendered to the end
        (`SynthesisJob.first_piece_done`) waits: that one renders
        on every core, and the next is better taken by a first-audio worker (every core)
        once it has spoken than on one niced thread beside it, where it would stay slow to
        the end and leave the listener silent after a short first chunk.
        """
        self._prune()
        heads: dict[int, SynthesisJob] = {}
        sending: dict[int, SynthesisJob] = {}
        for job in self._jobs:
            sending.setdefault(id(job.listener), job)
            if not job.rendered_all:
                heads.setdefault(id(job.listener), job)
        share = self.share(len({id(job.listener) for job in self._jobs}))
        total_held = sum(job.held_bytes for job in self._jobs)

        def lane_of(job: SynthesisJob) -> bool | None:
            """True: first-audio work; False: steady work; None: not yet."""
            head = heads[id(job.listener)]
            if job is head:
                return job.first_audio_at is None
            return None if not head.first_piece_done else False

        def within_budget(job: SynthesisJob) -> bool:
            """Its listener holds less than its share, or nothing; or the job is the one its
            route is sending and it has nothing left to send (the bytes held are of later
            requests, which cannot go out before it)."""
            held = job.listener.held_bytes
            if held == 0 or (job is sending[id(job.listener)] and job.held_bytes == 0):
                return True
            return held < share and total_held < self.budgets.buffer_budget_bytes

        ready = [
            job for job in self._jobs
            if not job.rendering and not job.rendered_all and within_budget(job) and lane_of(job) is first_only
        ]
        return min(ready, key=SynthesisJob.urgency, default=None)

    # --- rendering -------------------------------------------------------------------

    async def _work(self, pool: ThreadPoolExecutor, first_only: bool) -> None:
        loop = asyncio.get_running_loop()
        while True:
            async with self._wakeup:
                self._idle_first_workers += first_only
                try:
                    await self._wakeup.wait_for(lambda: self._next_job(first_only) is not None)
                finally:
                    self._idle_first_workers -= first_only
                job = self._next_job(first_only)
                assert job is not None
                job.rendering = True
                self.rendering += 1
                self._note_first_audio_waiting()
            try:
                await self._step(job, loop, pool)
            except Exception as error:  # noqa: BLE001 - the request fails, the worker goes on
                self._fail(job, error)
            finally:
                job.rendering = False
                self.rendering -= 1
                self._wake()

    @staticmethod
    def _fail(job: SynthesisJob, error: Exception) -> None:
        """Log the cause once and hand the request's consumer a `RenderFailed`."""
        log.error("synthesis failed", exc_info=error, extra={"request_id": job.request_id})
        failure = RenderFailed()
        failure.__cause__ = error
        job.fail(failure)

    async def _step(self, job: SynthesisJob, loop: asyncio.AbstractEventLoop, pool: ThreadPoolExecutor) -> None:
        """Render and encode the job's next piece on ``pool`` and hand it over."""
        if job.pieces is None:
            waited = time.monotonic() - job.due_since
            if waited > self.budgets.stale_after_s:
                job.fail(self._stale(waited))
                return
            job.pieces = self.engine.plan(
                job.text, job.language, cut_first_clause=job.listener.silent, words=job.word_timestamps
            )
            job.start_speaking()
        started = time.perf_counter()
        first_audio = pool is self._first_audio_pool

        def early(part: _Part) -> None:
            """A part of a piece vocoded window by window, handed over before the rest (from the worker)."""
            loop.call_soon_threadsafe(self._hand_over, job, part, False)

        part = await loop.run_in_executor(pool, self._render_next, job, first_audio, early)
        job.model_seconds += time.perf_counter() - started
        if part is None:  # a windowed piece left for a steady worker: its parts so far are handed over
            self.moved_pieces += 1
            return
        self._hand_over(job, part, True)

    def _hand_over(self, job: SynthesisJob, part: _Part, done: bool) -> None:
        """Count a rendered part against its request and listener, and deliver it (on the loop).
        ``done``: the worker's step is over (the piece's last part, or all of a whole piece)."""
        if job.finished:  # cancelled while the piece was rendering: drop it
            return
        data, seconds, last, words = part
        timed = tuple(offset_words(words, job.audio_seconds))
        if seconds:
            job.audio_seconds += seconds
            self.rendered_seconds += seconds
            job.listener.buffered(seconds)
            if job.first_audio_at is None:
                job.first_audio_at = time.monotonic()
        job.first_piece_done = job.first_piece_done or (done and job.first_audio_at is not None)
        job.deliver(RenderedChunk(data, seconds, timed), last and done)
        self.peak_listener_bytes = max(self.peak_listener_bytes, job.listener.held_bytes)
        if last and done:
            self._next_is_due(job)

    def _next_is_due(self, rendered: SynthesisJob) -> None:
        """The listener's next request starts waiting now (for staleness)."""
        for job in self._jobs:
            if job.listener is rendered.listener and not job.rendered_all and job is not rendered:
                job.due_since = max(job.due_since, time.monotonic())
                return

    def _render_next(self, job: SynthesisJob, first_audio: bool, early: Callable[[_Part], None]) -> _Part | None:
        """The next piece (or the rest of one a first-audio worker left), encoded: its bytes,
        its duration, whether it was the request's last (then the encoder's tail is included)
        and its words timed from the start of the part. A piece vocoded window by window hands
        each part but the last to ``early`` as it is made, and stops when the request ends
        meanwhile; None: a first-audio worker left the rest of it on the job. Runs in a worker
        thread; first audio gets every core when nothing else holds one."""
        unfinished: _Unfinished | None = job.unfinished  # type: ignore[assignment]
        job.unfinished = None
        if unfinished is None:
            piece: Piece | None = next(job.pieces, None)  # type: ignore[call-overload]
            if piece is None:
                return _encode(job, None, last=True), 0.0, True, []
            unfinished = _Unfinished(piece)
        if not first_audio:
            with CPU_USE.holding(1):
                return self._render(job, unfinished, 1, early, may_leave=False)
        with CPU_USE.claim_urgent(self.engine.max_threads, pause_background=job.listener.silent) as threads:
            return self._render(job, unfinished, threads, early, may_leave=True)

    def _windowed_if_dry(self, job: SynthesisJob, piece: Piece, threads: int) -> Piece:
        """The piece, vocoded window by window if its listener would run out of audio before a
        whole render of it ends (the plan already windows a silent listener's first piece)."""
        if piece.windowed or not self.engine.can_window:
            return piece
        if job.listener.left_to_play() >= self.pace.predict(len(piece.phonemes), job.speed, threads):
            return piece
        return replace(piece, windowed=True)

    def _render(
        self, job: SynthesisJob, unfinished: _Unfinished, threads: int, early: Callable[[_Part], None], may_leave: bool
    ) -> _Part | None:
        """One piece's model runs, part by part (a piece planned without words comes back with
        none), each part's words timed from the part's own start. With ``may_leave`` (a
        first-audio worker) a windowed piece is left on the job after a part when another
        listener's first piece waits for a first-audio worker: None is returned."""
        if unfinished.parts is None:
            unfinished.piece = self._windowed_if_dry(job, unfinished.piece, threads)
            unfinished.parts = self.engine.render_parts(unfinished.piece, job.voice, job.speed, threads)
            send: int | None = None
        else:  # the rest of a piece a first-audio worker left: on this worker's threads
            send = threads
        piece, started = unfinished.piece, time.perf_counter()
        for part in _sending(unfinished.parts, send):
            encoded = _encode(job, part.audio, piece.last and not part.more), part.audio.size / self.engine.sample_rate
            words = offset_words(part.words, -unfinished.before) if unfinished.before else part.words
            if not part.more:
                if not unfinished.moved:  # a moved piece's time is two workers' and a wait
                    self.pace.record(len(piece.phonemes), job.speed, threads, time.perf_counter() - started)
                return (*encoded, piece.last, words)
            early((*encoded, piece.last, words))
            unfinished.before += encoded[1]
            if job.finished:
                break
            if may_leave and self.first_audio_waiting:
                unfinished.moved = True
                job.unfinished = unfinished
                return None
        if not job.finished:  # the request fails (logged) rather than lose the piece's end unsaid
            raise RuntimeError("the piece's parts ended before its last part")
        return b"", 0.0, piece.last, []


@dataclass
class _Unfinished:
    """A piece being rendered: its parts to come, and how far they have got."""

    piece: Piece
    parts: Generator[RenderedPiece, int | None, None] | None = None
    before: float = 0.0
    """Seconds of the piece in the parts handed over so far."""
    moved: bool = False
    """A first-audio worker left it for a steady one."""


def _sending(parts: Generator[RenderedPiece, int | None, None], first: int | None) -> Iterator[RenderedPiece]:
    """The parts, the first asked for with ``first`` sent in (a thread count, or None).
    Not ``yield from``: a worker that leaves the piece drops this iterator, and closing a
    ``yield from`` would close ``parts`` with it, losing the rest of the piece."""
    sent = first
    while True:
        try:
            part = parts.send(sent)
        except StopIteration:
            return
        sent = None
        yield part


_Part = tuple[bytes, float, bool, list[WordTiming]]
"""A rendered part as the scheduler hands it over: wire bytes, seconds, whether its piece is
the request's last, and its words timed from the part's start (a windowed piece's last word
starts before its last part)."""


def _encode(job: SynthesisJob, audio: np.ndarray | None, last: bool) -> bytes:
    """Wire bytes of one piece, and the stream's tail after the last (in the worker thread)."""
    if job.encoder is None:  # the scheduler used on its own (tests, scripts): pcm16 at 24 kHz
        return b"" if audio is None else (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2").tobytes()
    data = b"" if audio is None else job.encoder.encode(audio)
    return data + job.encoder.finish() if last else data
