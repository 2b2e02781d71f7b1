"""One engine, many listeners: the workers that render pieces, and the budgets they keep.

What renders next is one policy (`voicestream.speech.policy`), driven by each listener's
slack: the audio it has left to play less the predicted render of the piece it needs next
(`voicestream.speech.pace`, from this server's own runs). A listener about to run dry is
urgent, whether its piece is its first or its fifth; one with slack in hand yields. Every
piece is vocoded window by window (`voicestream.engine.vocoder`), so that it can move at a
part. Who gets the cores is ranked (`voicestream.cpus.CpuUse`): an urgent run renders at
normal priority on every core it can claim (a second one at once gets one thread, and the
first goes on with one from its next part), a silent listener's first words at a level above
a playing listener's (which pauses no background work: the local LLM writes what it needs
next); a yielding run has one thread at normal priority, and each of its parts waits, before
it starts, up to a second while an urgent run goes (`CpuUse.ranked`): a wait, not a nice
value, so that no other process's work can starve a run once it goes (a raised nice value
cannot be lowered again). A new
request's first words stop, between two nodes, other listeners' model runs of lower levels
going when they claim the cores (a ranked run, or an urgent run of a listener that is
playing or ran dry after its audio began), which are made again after their wait; a cancelled request's run stops at once
(`voicestream.engine.memory.RunStop`). Least
slack goes first; of listeners that run dry whatever renders, the least audio left, then the
shortest render. A windowed piece is left after a part when the policy places its rest
elsewhere (its listener now has slack in hand beside an urgent one, an urgent one with less
slack waits, or an urgent worker is free for a yielding one); a listener that displaces it
starts at once on a spare urgent worker (`URGENT_SPARE`) rather than at its next part. Once a request's audio has
started, its listener's next request renders ahead on a yielding worker, windowed, unless
the first waits for an urgent worker (the session keeps the wire order).

Who owns what: the event loop owns the jobs, the listeners and every count below, takes a
frozen `Snapshot` for the policy and hands each start to an idle worker as a frozen
`_Order` (the decision, whether the listener is silent, a `threading.Event` to leave). A
worker's thread reads only its order, and owns its job's plan (`SynthesisJob.pieces`,
`upcoming`, `unfinished`) while the job is `rendering`; what it makes reaches the loop
through ``call_soon_threadsafe``. `RenderPace` is shared, under its own lock.

The scheduler owns every budget of the server (docs/RELIABILITY.md), so that no route can
hold memory the others do not see:

- **queue slots**: a request holds one from `submit` until its audio is sent or it ended
  (`voicestream.speech.job`). A session reserves ``max_queue // max_sessions`` slots for
  itself, so sessions that never read cannot fill the queue for the others; beyond its
  reserve a request takes a shared slot if one is left, else it is refused (`BusyError`).
- **bytes**: a piece's audio is encoded by the worker that rendered it (never on the event
  loop), and its bytes count against its listener until the route has sent them. A
  listener renders its next piece only while it holds less than its share
  (`Budgets.share`) or nothing its route must send before that piece (a request rendered
  ahead cannot go out before the one it follows, so its bytes never hold that one back): a
  client that never reads holds at most one share plus one piece, and a client that reads
  is never held back by the ones that do not.
- **staleness**: a request that waits for its first piece longer than ``stale_after_s`` on
  the server's clock (counted from when its listener's earlier requests were all rendered)
  fails with ``request_stale`` rather than speak long after it was wanted.

A **reaper** (one task beside the workers, every ``REAP_INTERVAL_S`` and whenever a listener
closes) ends every request whose listener is gone (`Listener.close`: its route ended, so
nobody will take its audio), whatever its state: queued, parked by its budget, speaking, or
rendered and unsent. Each is counted (`reaped`, ``voicestream_jobs_reaped_total``): a route
that ends its own requests leaves nothing to reap, so the count is the leaks caught. Each
pass also asks the policy again (slack changes as audio plays), which fails the stale.

Workers are supervised: a failure in one step fails that request (logged once, with its
traceback and request id) and the worker goes on; a worker that ends anyway is restarted,
and :attr:`SynthesisScheduler.healthy` turns false (``/ping`` answers 503) if it cannot be.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace

import numpy as np

from voicestream.cpus import CPU_USE, FIRST_WORDS, RAN_DRY
from voicestream.engine import KokoroEngine, Piece, RenderedPiece
from voicestream.engine.alignment import TimedWord, offset_words
from voicestream.engine.memory import RunStop, RunStopped, stopping
from voicestream.engine.phonemes import MAX_PHONEMES
from voicestream.protocol import ErrorCode
from voicestream.speech.job import (
    JobFailed,
    JobState,
    Listener,
    RenderedChunk,
    RequestRejected,
    SynthesisJob,
)
from voicestream.speech.pace import RenderPace
from voicestream.speech.policy import (
    Budgets,
    Lane,
    ListenerView,
    RequestView,
    Snapshot,
    decide,
    holds_start,
)

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


YIELDING_RANK = 2
"""The rank of a yielding run's parts (`CpuUse.ranked`): each waits while urgent work goes.
Urgent runs claim cores instead (`CpuUse.claim_urgent`): with one thread at rank 1, a playing
listener's own render ahead took the other core beside it after a second's wait, and a second
sentence rendered slower than it played (docs/BENCHMARKS.md, "How several listeners are
scheduled"). Nice values were tried instead of ranks (+15, +19): a run reniced beside other
processes' work starved (a clean clone beside another suite: 5 failures)."""
URGENT_SPARE = 1
"""Urgent workers beyond ``workers``, kept for a listener that outranks a running urgent run
(`Snapshot.urgent_spare`): a new request's first words start at once beside monologues
whose listeners ran dry, not at a monologue's next part."""
REAP_INTERVAL_S = 1.0
"""How often the reaper looks for requests whose listener is gone and asks the policy again
(it also looks at once when a listener closes)."""
_SENTENCE_END = re.compile(r"[.!?。！？](\s|$)")


@dataclass(frozen=True)
class _Order:
    """A worker's share of one decision: all its thread reads besides the job's plan."""

    job: SynthesisJob
    lane: Lane
    windowed: bool
    """A new piece is vocoded window by window (the rest of a left piece always is)."""
    silent: bool
    """The listener hears nothing now and waits for this request: its plan cuts the first
    clause, and an urgent run pauses background work (the local LLM) while it renders."""
    spoken: bool = False
    """Some of the request's audio went out: its urgent claim is `RAN_DRY`'s, which a new
    request's first words outrank (`voicestream.cpus.CpuUse.claim_urgent`)."""
    claims: bool = False
    """On a yielding worker, its run still claims the cores (`Start.claims`: an urgent need no
    urgent worker was free for)."""
    leave: threading.Event = field(default_factory=threading.Event)
    """Set by the loop: leave the windowed piece after the current part (the policy placed
    its rest elsewhere, or the request ended)."""
    stop: RunStop = field(default_factory=RunStop)
    """Stopped by the loop when the request ended: the model run going stops between two
    nodes, so that the cores go at once to whoever is waiting (a barge-in's next answer)."""


def _claims_cores(order: _Order) -> bool:
    """An urgent run, or one the policy placed on a yielding worker for an urgent need (no
    urgent worker was free: `Start.claims`; a silent listener's need is always urgent): normal
    priority, every core it can claim (`CpuUse.claim_urgent`). A ranked run would wait up to a
    second at each part while the urgent runs go, and its listener has no audio, or too little,
    to wait on: three answers at once on two cores start alike, not two and then the third."""
    return order.lane is Lane.URGENT or order.claims


@dataclass
class _Running:
    """The loop's record of a job a worker renders."""

    order: _Order
    phonemes: int
    """Of the piece being rendered (an estimate until its first part comes)."""
    leavable: bool


class SynthesisScheduler:
    """Runs the engine on a few workers per lane, as the policy decides, within the budgets."""

    def __init__(
        self, engine: KokoroEngine, budgets: Budgets | None = None, workers: int | None = None
    ) -> None:
        self.engine = engine
        self.budgets = budgets or Budgets()
        self.workers = workers or engine.parallel_runs
        self._jobs: list[SynthesisJob] = []
        self._seq = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._wake_pending = False
        self._idle: dict[Lane, deque[asyncio.Future[_Order]]] = {lane: deque() for lane in Lane}
        self._running: dict[SynthesisJob, _Running] = {}
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
        """Windowed pieces left after a part for the policy to place again (a metric)."""
        self.stopped_runs = 0
        """Pieces whose model run was stopped mid-run because their request ended (`_Order.stop`; a metric)."""
        self.reaped = 0
        """Requests the reaper ended because their listener was gone (a metric: leaks caught)."""
        self.on_reap: Callable[[SynthesisJob, JobState], None] | None = None
        """Told of every request the reaper ends, with the state it was in (the service counts them)."""
        self._reaper: asyncio.Task[None] | None = None
        self._reap_wanted = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.pace = RenderPace()
        """How long renders take here: the policy's prediction of each listener's slack."""
        self._urgent_pool = ThreadPoolExecutor(self.workers + URGENT_SPARE, thread_name_prefix="urgent")
        """Threads at normal priority for urgent runs, which claim every core they can."""
        self._ranked_pool = ThreadPoolExecutor(2 * self.workers + URGENT_SPARE, thread_name_prefix="ranked")
        """Threads that drive yielding runs, one thread each, each part after its wait (`CpuUse.ranked`)."""

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
        self._prune()
        idle = replace(self._snapshot(), urgent_free=self.workers + URGENT_SPARE, yielding_free=self.workers)
        return self.rendering == 0 and not decide(idle).starts

    @property
    def healthy(self) -> bool:
        """Every worker and the reaper are running: the server can synthesize."""
        workers = bool(self._tasks) and all(not task.done() for task in self._tasks)
        return workers and self._reaper is not None and not self._reaper.done()

    def start(self) -> None:
        if self._tasks:
            return
        self._loop = asyncio.get_running_loop()
        for lane, count in ((Lane.URGENT, self.workers + URGENT_SPARE), (Lane.YIELDING, self.workers)):
            self._tasks.extend(self._spawn(f"{lane.value}-{index}", lane) for index in range(count))
        self._reaper = self._loop.create_task(self._reap_loop(), name="reaper")

    def _spawn(self, name: str, lane: Lane) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(self._work(lane), name=name)
        task.add_done_callback(self._restart)
        return task

    def _restart(self, task: asyncio.Task[None]) -> None:
        """A worker ended although nothing stopped it: log why and start a new one."""
        if self._stopping or task.cancelled() or task not in self._tasks:
            return
        log.error("scheduler worker %s ended; restarting it", task.get_name(), exc_info=task.exception())
        index = self._tasks.index(task)
        try:
            self._tasks[index] = self._spawn(task.get_name(), Lane(task.get_name().rsplit("-", 1)[0]))
        except RuntimeError:  # the loop is closing: the worker stays dead and /ping says so
            log.exception("scheduler worker %s could not be restarted", task.get_name())

    async def stop(self) -> None:
        """Stop for good (the drain's cut, then the app's end; once is enough): every model
        run going stops between two nodes, every request not finished fails ``busy`` (its
        route tells its client), the workers end. Never waits for a worker's thread: a run
        that does not stop at once finishes on its own and its audio is dropped, or the
        process exits first (`voicestream.edge.drain`)."""
        if self._stopping:
            return
        self._stopping = True
        for running in self._running.values():  # before the workers end: each forgets its order then
            running.order.leave.set()
            running.order.stop.stop()
        reaper = [self._reaper] if self._reaper is not None else []
        for task in [*self._tasks, *reaper]:
            task.cancel()
        await asyncio.gather(*self._tasks, *reaper, return_exceptions=True)
        self._tasks.clear()
        for job in self._jobs:
            job.fail(JobFailed(ErrorCode.BUSY, "The server shut down before this request was finished; send it again."))
        self._jobs.clear()
        self._urgent_pool.shutdown(wait=False, cancel_futures=True)
        self._ranked_pool.shutdown(wait=False, cancel_futures=True)

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

    # --- deciding --------------------------------------------------------------------

    def _wake(self) -> None:
        """Ask the policy again (coalesced: once per loop turn; on the loop)."""
        if self._wake_pending or self._stopping:
            return
        self._wake_pending = True
        asyncio.get_running_loop().call_soon(self._apply)

    def _snapshot(self) -> Snapshot:
        """The policy's view of the requests and listeners now (on the loop)."""
        now = time.monotonic()
        listeners = {id(job.listener): job.listener for job in self._jobs}
        return Snapshot(
            listeners=tuple(
                ListenerView(key, listener.left_to_play(), listener.held_bytes) for key, listener in listeners.items()
            ),
            requests=tuple(self._views(now)),
            urgent_free=sum(not waiter.done() for waiter in self._idle[Lane.URGENT]),
            urgent_spare=URGENT_SPARE,
            yielding_free=sum(not waiter.done() for waiter in self._idle[Lane.YIELDING]),
            pace=self.pace.table(),
            many_threads=self.engine.max_threads,
            can_window=self.engine.can_window,
            budgets=self.budgets,
        )

    def _views(self, now: float) -> Iterator[RequestView]:
        """The requests not rendered to their end, in arrival order, each with the bytes its
        route sends before its next piece (its own and its listener's earlier requests')."""
        held: dict[int, int] = {}
        for job in self._jobs:
            key = id(job.listener)
            held[key] = held.get(key, 0) + job.held_bytes
            if job.rendered_all:
                continue
            running = self._running.get(job)
            yield RequestView(
                key=job.seq, listener=key, phonemes=running.phonemes if running else _next_phonemes(job),
                speed=job.speed, planned=job.pieces is not None, spoken=job.audio_seconds > 0,
                waited_s=now - job.due_since, running=running.order.lane if running else None,
                leavable=running.leavable if running else False, held_before=held[key],
            )

    def _apply(self) -> None:
        """Take the policy's decisions: fail the stale, tell leaving workers, start the rest."""
        self._wake_pending = False
        if self._stopping:
            return
        self._prune()
        for running in self._running.values():
            if running.order.job.finished:
                running.order.leave.set()
                running.order.stop.stop()
        decisions = decide(self._snapshot())
        jobs = {job.seq: job for job in self._jobs}
        heads: dict[int, SynthesisJob] = {}
        for job in self._jobs:
            if not job.rendered_all:
                heads.setdefault(id(job.listener), job)
        for key in decisions.stale:
            jobs[key].fail(self._stale(time.monotonic() - jobs[key].due_since))
        for key in decisions.leave:
            self._running[jobs[key]].order.leave.set()
        for start in decisions.starts:
            job = jobs[start.request]
            silent = job.listener.silent and heads[id(job.listener)] is job  # one rendering ahead is heard later
            order = _Order(job, start.lane, start.windowed, silent, spoken=job.audio_seconds > 0, claims=start.claims)
            leavable = job.unfinished is not None or start.windowed
            self._running[job] = _Running(order, _next_phonemes(job), leavable)
            job.rendering = True
            self.rendering += 1
            waiter = self._idle[start.lane].popleft()
            while waiter.done():  # a worker cancelled while idle, not yet out of the queue
                waiter = self._idle[start.lane].popleft()
            waiter.set_result(order)

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
                self._apply()
            except Exception:  # the reaper goes on; the next pass tries again
                log.exception("the reaper failed on one pass")

    def reap(self) -> int:
        """End every request whose listener is gone, whatever its state. Returns how many."""
        reaped = 0
        for job in list(self._jobs):
            if job.finished or not job.listener.gone:
                continue
            state = job.state
            job.cancel()
            reaped += 1
            log.warning("reaped a %s request whose listener was gone", state.value, extra={"request_id": job.request_id})
            if self.on_reap is not None:
                self.on_reap(job, state)
        self.reaped += reaped
        self._prune()
        return reaped

    def _stale(self, waited: float) -> JobFailed:
        return JobFailed(
            ErrorCode.REQUEST_STALE,
            f"The request waited {waited:.1f} s for the engine; requests that wait longer "
            f"than {self.budgets.stale_after_s:g} s are dropped.",
        )

    # --- rendering -------------------------------------------------------------------

    async def _work(self, lane: Lane) -> None:
        while True:
            order = await self._next_order(lane)
            try:
                await self._step(order)
            except Exception as error:  # noqa: BLE001 - the request fails, the worker goes on
                self._fail(order.job, error)
            finally:
                self._done(order)

    async def _next_order(self, lane: Lane) -> _Order:
        """Wait idle until the loop hands this worker an order."""
        waiter: asyncio.Future[_Order] = asyncio.get_running_loop().create_future()
        self._idle[lane].append(waiter)
        self._wake()
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # handed an order as it was cancelled
                self._done(waiter.result())
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._idle[lane].remove(waiter)

    def _done(self, order: _Order) -> None:
        order.job.rendering = False
        self._running.pop(order.job, None)
        self.rendering -= 1
        self._wake()

    @staticmethod
    def _fail(job: SynthesisJob, error: Exception) -> None:
        """Log the cause once and hand the request's consumer a `RenderFailed`."""
        log.error("synthesis failed", exc_info=error, extra={"request_id": job.request_id})
        failure = RenderFailed()
        failure.__cause__ = error
        job.fail(failure)

    async def _step(self, order: _Order) -> None:
        """Render and encode the job's next piece on the order's lane, handing each part over."""
        job = order.job
        if job.pieces is None:
            job.pieces = self.engine.plan(
                job.text, job.language, cut_first_clause=order.silent, words=job.word_timestamps, lexicon=job.lexicon
            )
            job.start_speaking()
        loop = asyncio.get_running_loop()
        since = time.perf_counter()

        def hand_over(part: _Part) -> None:
            """A rendered part, from the worker's thread to the loop, with the time it took:
            counted before the part is delivered, so that whoever the last part wakes (a
            whole file's timing headers) reads the request's whole model time."""
            nonlocal since
            now = time.perf_counter()
            loop.call_soon_threadsafe(self._hand_over, job, part, now - since)
            since = now

        pool = self._urgent_pool if order.lane is Lane.URGENT else self._ranked_pool
        try:
            self.moved_pieces += await loop.run_in_executor(pool, self._render_next, order, hand_over)
        except RunStopped:  # its request ended while the piece rendered (`_Order.stop`)
            self.stopped_runs += 1

    def _hand_over(self, job: SynthesisJob, part: _Part, model_seconds: float) -> None:
        """Count a rendered part against its request and listener, and deliver it (on the loop)."""
        job.model_seconds += model_seconds
        running = self._running.get(job)
        if running is not None:
            running.phonemes = part.phonemes
        if job.finished:  # cancelled while the piece was rendering: drop it
            return
        if part.opens_piece:
            job.piece_start_s = job.audio_seconds
        timed = tuple(offset_words(part.words, job.piece_start_s))
        if part.seconds:
            job.audio_seconds += part.seconds
            self.rendered_seconds += part.seconds
            job.listener.buffered(part.seconds)
        job.deliver(RenderedChunk(part.data, part.seconds, timed), part.last)
        self.peak_listener_bytes = max(self.peak_listener_bytes, job.listener.held_bytes)
        if part.last:
            self._next_is_due(job)
        self._wake()  # its listener's slack changed

    def _next_is_due(self, rendered: SynthesisJob) -> None:
        """The listener's next request starts waiting now (for staleness)."""
        for job in self._jobs:
            if job.listener is rendered.listener and not job.rendered_all and job is not rendered:
                job.due_since = max(job.due_since, time.monotonic())
                return

    def _render_next(self, order: _Order, hand_over: Callable[[_Part], None]) -> bool:
        """The job's next piece (or the rest of one left after a part), each part encoded and
        handed over as it is made; then the piece after it is taken from the plan, so that the
        policy knows its length. True: the piece was left after a part, its rest on the job.
        `RunStopped` once the request ended (`_Order.stop`). Runs in a worker thread; an
        urgent run claims every core it can."""
        job = order.job
        unfinished: _Unfinished | None = job.unfinished  # type: ignore[assignment]
        job.unfinished = None
        if unfinished is None:
            piece: Piece | None = job.upcoming or next(job.pieces, None)  # type: ignore[assignment, call-overload]
            job.upcoming = None
            if piece is None:
                hand_over(_Part(_encode(job, None, last=True), 0.0, True, [], 0))
                return False
            unfinished = _Unfinished(replace(piece, windowed=order.windowed and self.engine.can_window))
        with stopping(order.stop):  # RunStopped once the request ended: nothing of it is wanted
            if _claims_cores(order):
                level = FIRST_WORDS if order.silent and not order.spoken else RAN_DRY
                claim = CPU_USE.claim_urgent(
                    self.engine.max_threads, pause_background=order.silent, level=level, owner=job.listener
                )
                with claim as threads:
                    left = self._render(order, unfinished, threads, hand_over, contextlib.nullcontext)
            else:
                each_part = functools.partial(CPU_USE.ranked, YIELDING_RANK, job.listener)
                left = self._render(order, unfinished, 1, hand_over, each_part)
        if not left and not unfinished.piece.last:
            job.upcoming = next(job.pieces, None)  # type: ignore[call-overload]
        return left

    def _render(
        self, order: _Order, unfinished: _Unfinished, threads: int, hand_over: Callable[[_Part], None],
        each_part: _EachPart,
    ) -> bool:
        """One piece's model runs, part by part (a piece planned without words comes back with
        none), each part's words timed from the piece's start, each part made inside
        ``each_part()``.
        A windowed piece is left on the job after a part once the order's ``leave`` is set:
        True is returned."""
        job = order.job
        if unfinished.parts is None:
            unfinished.parts = self.engine.render_parts(unfinished.piece, job.voice, job.speed, threads)
            send: int | None = None
        else:  # the rest of a piece left after a part: on this worker's threads
            send = threads
        piece, started, claimed = unfinished.piece, time.perf_counter(), threads

        def narrowed() -> int | None:
            """One thread for the windows after this part once other first audio claims cores
            beside this run: two runs on every core each fight over the cores, and both
            listeners fall silent."""
            nonlocal threads
            if threads > 1 and CPU_USE.crowded():
                threads = 1
                CPU_USE.narrowed()
                return 1
            return None

        held: list[_Part] = []  # a silent listener's first part, waiting for its second (`holds_start`)
        for rendered in _sending(unfinished.parts, send, narrowed, each_part):
            data, seconds = _encode(job, rendered.audio, piece.last and not rendered.more), rendered.audio.size / self.engine.sample_rate
            part = _Part(data, seconds, piece.last and not rendered.more, rendered.words, len(piece.phonemes),
                         opens_piece=unfinished.before == 0)
            if rendered.more and self._holds_start(order, unfinished, part):
                held.append(part)
            else:
                for each in (*held, part):
                    hand_over(each)
                if seconds or held:
                    CPU_USE.words_out()
                held.clear()
            if not rendered.more:
                if not unfinished.moved and threads == claimed:  # else its time is two workers' or thread counts'
                    elapsed = time.perf_counter() - started
                    self.pace.record(len(piece.phonemes), job.speed, threads, elapsed, unfinished.before + seconds)
                return False
            unfinished.before += seconds
            if order.leave.is_set() and not held:
                unfinished.moved = True
                job.unfinished = unfinished
                return True
        raise RuntimeError("the piece's parts ended before its last part")

    def _holds_start(self, order: _Order, unfinished: _Unfinished, part: _Part) -> bool:
        """The part is a silent listener's first, made beside another listener's first words,
        and the policy holds it for the next (`holds_start`): on one thread, as the run goes on
        once crowded (`CpuUse.crowded`)."""
        first = order.silent and not order.spoken and unfinished.before == 0 and not unfinished.moved
        return first and CPU_USE.crowded() and holds_start(part.seconds, self.pace.table(), 1)


def _next_phonemes(job: SynthesisJob) -> int:
    """The phonemes of the job's next piece as far as the loop knows them: the rest of a left
    piece, the piece its last step took from the plan, or, before its plan, its text's first
    sentence (about one phoneme a character)."""
    piece = job.unfinished.piece if job.unfinished is not None else job.upcoming  # type: ignore[attr-defined]
    if piece is not None:
        return len(piece.phonemes)
    end = _SENTENCE_END.search(job.text)
    return min(end.end() if end else len(job.text), MAX_PHONEMES)


@dataclass
class _Unfinished:
    """A piece being rendered: its parts to come, and how far they have got."""

    piece: Piece
    parts: Generator[RenderedPiece, int | None, None] | None = None
    before: float = 0.0
    """Seconds of the piece in the parts handed over so far."""
    moved: bool = False
    """A worker left it after a part."""


_EachPart = Callable[[], AbstractContextManager[object]]
"""What each part's model runs go inside: nothing for first audio, `CpuUse.ranked` (a wait for
more urgent runs, then a core held) for every other run."""


def _sending(
    parts: Generator[RenderedPiece, int | None, None], first: int | None, after: Callable[[], int | None],
    each_part: _EachPart,
) -> Iterator[RenderedPiece]:
    """The parts, each made inside ``each_part()``, the first asked for with ``first`` sent in (a thread
    count, or None), each next one with what ``after`` says then. Not ``yield from``: a
    worker that leaves the piece drops this iterator, and closing a ``yield from`` would
    close ``parts`` with it, losing the rest of the piece."""
    sent = first
    while True:
        with each_part():
            try:
                part = parts.send(sent)
            except StopIteration:
                return
        yield part
        sent = after()


@dataclass(frozen=True)
class _Part:
    """A rendered part as a worker hands it over: wire bytes, seconds, whether it ends the
    request, its words timed from its piece's start (as the engine times them: a windowed
    piece's last word starts before its last part), and its piece's phonemes (for the policy)."""

    data: bytes
    seconds: float
    last: bool
    words: list[TimedWord]
    phonemes: int
    opens_piece: bool = False
    """No audio of its piece went before it: the piece starts where this part does."""


def _encode(job: SynthesisJob, audio: np.ndarray | None, last: bool) -> bytes:
    """Wire bytes of one piece, and the stream's tail after the last (in the worker thread)."""
    if job.encoder is None:  # the scheduler used on its own (tests, scripts): pcm16 at 24 kHz
        return b"" if audio is None else (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2").tobytes()
    data = b"" if audio is None else job.encoder.encode(audio)
    return data + job.encoder.finish() if last else data
