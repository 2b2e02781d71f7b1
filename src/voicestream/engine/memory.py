"""The engine's memory: what a burst of speech took is handed back once the engine is idle.

Two allocators keep memory after a model run. ONNX Runtime's CPU arena keeps the largest
buffers of every input length it saw, so every run is made with the arena shrunk after
it (`run`). What the arena frees goes back to glibc's malloc, which keeps it as well: the
freed chunks stay in the heap of the arena they came from (one arena per thread that
allocated, up to eight per core), and a heap gives pages back to the system only from its
top. A server kept 37 to 45 % more than its idle memory after a load (docs/BENCHMARKS.md,
"Memory after a load"). So once no model run has gone for a second (`DEFAULT_RELEASE_AFTER_S`),
a background thread
calls glibc's ``malloc_trim(0)``, which hands every whole free page of every arena back:
a few milliseconds, off the render path; the cost is the page faults of the next runs.
Where the C library is not glibc, nothing is released and nothing else changes.

That is not all of it: an ONNX Runtime session itself keeps memory from the runs it made at
once on several threads (measured on one engine, five threads at once: the single-thread
session held 116 MB that `malloc_trim` could not give back, and dropping it gave it back; a
one-off script, see docs/BENCHMARKS.md). So when the anonymous resident set after a release is
still more than `DEFAULT_RENEW_ABOVE` times the lowest it has been, and no run has gone for
`RENEW_AFTER_S`, every engine that registered (`Renewable`) builds again, from the same graph
files, each session that had runs at once since it was built, one at a time (about 0.4 s of
CPU each, off the render path; a run that starts stops it, and the next quiet spell does it
again). The audio does not change: a renewed session renders the same samples.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from voicestream.cpus import CPU_USE

if TYPE_CHECKING:
    import numpy as np
    import onnxruntime as ort

DEFAULT_RELEASE_AFTER_S = 1.0
"""Seconds without a model run before the heap is handed back (the server's
``VOICESTREAM_RELEASE_AFTER_S``; 0 never hands it back). Longer than the gap between one
request's pieces, so that a stream of speech never waits for a release nor faults its pages
in again."""


@functools.cache
def _glibc() -> Any | None:
    """The process's C library if it is glibc (it has ``malloc_trim``), else None."""
    try:
        libc = ctypes.CDLL(None)
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
    except (OSError, AttributeError, TypeError):  # no C library by that name, or not glibc
        return None
    return libc


def release_heap() -> bool:
    """Hand malloc's free pages back to the system now (glibc's ``malloc_trim(0)``).
    False where the C library is not glibc, or nothing could be given back."""
    libc = _glibc()
    return bool(libc.malloc_trim(0)) if libc is not None else False


def anonymous_resident_bytes() -> int | None:
    """The process's anonymous resident memory (``RssAnon``: the heaps, not the files mapped in),
    or None where /proc does not say."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith("RssAnon:"))
    except (OSError, StopIteration, ValueError):
        return None


DEFAULT_RENEW_ABOVE = 1.1
"""Sessions are built again when the anonymous resident set after a release is more than this
many times the lowest seen after a release (and a session had runs at once since it was built);
the server's ``VOICESTREAM_RENEW_ABOVE``, 0 never renews. A renewal costs CPU, so it waits for growth worth
giving back."""
RENEW_AFTER_S = 30.0
"""Seconds without a model run before a renewal that is due: a release comes after one second,
but building the sessions again costs up to two seconds of CPU, which a server between the
bursts of its traffic should not spend (a test suite's workers, whose engines wait on sockets
and subprocesses for seconds at a time, would renew after most of those waits with 5 s)."""


class Renewable(Protocol):
    """What the idle release can renew: an engine whose sessions can be built again."""

    def has_sessions_to_renew(self) -> bool:
        """Whether a session of the engine had runs at once since it was built."""
        ...

    def renew_sessions(self, still_quiet: Callable[[], bool]) -> bool:
        """Build those sessions again, one at a time, while ``still_quiet()``; True when all were."""
        ...


@functools.cache
def _shrinking_run_options() -> ort.RunOptions:
    """`new_run_options` made once: every run that cannot be stopped shares it."""
    return new_run_options()


def new_run_options() -> ort.RunOptions:
    """Run options that hand the CPU arena's memory back after each run.

    ONNX Runtime's arena keeps the largest buffers each input length ever needed, so a
    server's memory only ratcheted up with every new sentence length (measured, two passes
    over four texts: 407 -> 1,196 MB); shrinking after each run keeps it flat (433 -> 434 MB)
    at the arena's speed within a run (CPU time 45.0 s against 41.2 s, within this machine's
    noise; no arena at all cost 61.6 s; a one-off script, not a bench). See
    docs/RELIABILITY.md.
    """
    import onnxruntime as ort

    options = ort.RunOptions()
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return options


class IdleRelease:
    """Counts the model runs of the engines given it and calls `release_heap` once none has
    started or ended for ``after_s``: once per quiet spell, from one daemon thread started with
    the first run. malloc's heap is the process's, whichever engine runs, so a process wants
    one: the server makes it from its settings and hands it to the engine it loads; an engine
    made without one makes its own, with the defaults.

    After a release it renews, in the registered engines, the sessions that had runs at once
    since they were built (what a session keeps grows with them), when the anonymous resident
    set is more than ``renew_above`` times the lowest seen after a release. It waits for
    ``renew_after_s`` without a run first, so a server between two bursts does not spend the
    CPU."""

    def __init__(
        self,
        after_s: float = DEFAULT_RELEASE_AFTER_S,
        renew_above: float = DEFAULT_RENEW_ABOVE,
        renew_after_s: float = RENEW_AFTER_S,
    ) -> None:
        self.after_s = after_s
        self.releases = 0
        """Times the heap was handed back (a test waits on it)."""
        self.renew_above = renew_above
        self.renew_after_s = renew_after_s
        self.renewals = 0
        """Times the registered engines' sessions were all built again."""
        self.asked = 0
        """Model runs ended and `release_soon` calls: each a reason for a release after it, so
        that a test tells a release something in the process asked for from one out of nothing."""
        self._renewable: weakref.WeakSet[Renewable] = weakref.WeakSet()
        self._lowest: int | None = None  # the anonymous resident set, lowest after a release
        self._on_session: dict[int, int] = {}  # runs going on, by id() of their session
        self._ran_at_once: weakref.WeakSet[Any] = weakref.WeakSet()
        """Sessions that had two runs or more going on at once: what a renewal rebuilds."""
        self._releasing = False
        self._running = 0
        self._events = 0  # runs started or ended: a quiet spell is one in which it stays put
        self._ran_since_release = False
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def running(self, session: Any = None) -> Iterator[None]:
        """Around one model run (on ``session``, when it is one a renewal may rebuild)."""
        key = id(session)
        with self._changed:
            self._running += 1
            self._events += 1
            self._ran_since_release = True
            if session is not None:
                self._on_session[key] = self._on_session.get(key, 0) + 1
                if self._on_session[key] > 1:
                    self._ran_at_once.add(session)
            self._start_locked()
            self._changed.notify_all()
        try:
            yield
        finally:
            with self._changed:
                self._running -= 1
                self._events += 1
                self.asked += 1
                if session is not None:
                    self._on_session[key] -= 1
                    if not self._on_session[key]:
                        del self._on_session[key]
                self._changed.notify_all()

    def _start_locked(self) -> None:
        """Start the release thread if it is not running yet (called holding the lock)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._release_when_quiet, name="memory-release", daemon=True)
            self._thread.start()

    def ran_at_once(self, session: Any) -> bool:
        """Whether ``session`` had runs going on at once since it was built."""
        with self._changed:
            return session in self._ran_at_once

    def renew_when_grown(self, engine: Renewable) -> None:
        """Renew ``engine``'s sessions in a quiet spell after memory grew (held weakly: an
        engine no longer used is not kept alive for this)."""
        with self._changed:
            self._renewable.add(engine)

    def release_soon(self) -> None:
        """Release the heap after the next quiet spell, though no run asks for it: a session
        replaced by a renewal that a parked request still held is freed only when that request
        lets go of it (`renew_sessions` calls this from the session's finalizer)."""
        with self._changed:
            self._ran_since_release = True
            self.asked += 1
            self._start_locked()
            self._changed.notify_all()

    @property
    def settled(self) -> bool:
        """Nothing runs and nothing is left to release or renew: the memory a process keeps
        when idle (what `voicestream bench chaos` waits for before it reads it)."""
        with self._changed:
            return not (self._running or self._releasing or (self._ran_since_release and self.after_s > 0))

    def _release_when_quiet(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(self._idle_after_runs)
                if not self._stays_quiet(self.after_s):
                    continue
                self._ran_since_release = False
                self._releasing = True
                seen = self._events
            try:
                release_heap()
                engines = self._renewal_due()
                if engines:
                    with self._changed:
                        quiet = self._stays_quiet(max(0.0, self.renew_after_s - self.after_s))
                    if quiet:
                        self._renew(engines, lambda seen=seen: self._events == seen)
            except Exception:  # the release thread must live on: the next spell tries again
                logging.getLogger(__name__).exception("releasing memory or renewing the model sessions failed")
            finally:
                with self._changed:
                    self.releases += 1
                    self._releasing = False
                    self._changed.notify_all()

    def _renewal_due(self) -> list[Renewable]:
        """The engines to renew now (see the class docstring); records the lowest heap."""
        resident = anonymous_resident_bytes()
        if resident is None:
            return []
        self._lowest = resident if self._lowest is None else min(self._lowest, resident)
        with self._changed:
            engines = list(self._renewable)
        if self.renew_above <= 0 or resident <= self._lowest * self.renew_above:
            return []
        return [engine for engine in engines if engine.has_sessions_to_renew()]

    def _renew(self, engines: list[Renewable], still_quiet: Callable[[], bool]) -> None:
        before, started = anonymous_resident_bytes() or 0, time.thread_time()
        if not all(engine.renew_sessions(still_quiet) for engine in engines):
            return  # a run started: the next quiet spell renews them
        with self._changed:
            self.renewals += 1
        release_heap()
        after = anonymous_resident_bytes() or 0
        logging.getLogger(__name__).info(
            "model sessions built again to give back what runs at once kept: %.0f -> %.0f MB anonymous "
            "(%.1f s of CPU)", before / 2**20, after / 2**20, time.thread_time() - started,
        )

    def _idle_after_runs(self) -> bool:
        return self._ran_since_release and self._running == 0 and self.after_s > 0

    def _stays_quiet(self, seconds: float) -> bool:
        """Whether no run starts or ends for ``seconds`` (called holding the lock)."""
        seen = self._events
        return not self._changed.wait_for(lambda: self._events != seen, timeout=seconds)


MAX_INTERRUPTIONS = 4
"""How often one model run may be stopped for a more urgent one (`voicestream.cpus.CpuUse.interruptible`)
before it is made without stopping: each stop throws its work away."""


class RunStopped(Exception):
    """A model run was stopped because what it renders is no longer wanted (`RunStop.stop`)."""


class RunStop:
    """Stops, at once, the model runs made under it (`stopping`): a request that ended while
    its piece renders frees the cores between two nodes, not when the run would have ended."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._going: set[ort.RunOptions] = set()
        self.stopped = False

    @property
    def going(self) -> int:
        """Runs going under it now."""
        with self._lock:
            return len(self._going)

    def stop(self) -> None:
        """Stop the runs going under it now, and every later one before it starts."""
        with self._lock:
            self.stopped = True
            for options in self._going:
                options.terminate = True

    @contextlib.contextmanager
    def covering(self, options: ort.RunOptions) -> Iterator[None]:
        with self._lock:
            if self.stopped:
                raise RunStopped("the run's request ended before it started")
            self._going.add(options)
        try:
            yield
        finally:
            with self._lock:
                self._going.discard(options)


_thread_stop = threading.local()


@contextlib.contextmanager
def stopping(stop: RunStop) -> Iterator[None]:
    """The calling thread's model runs in the block can be stopped by ``stop``: `run` raises
    `RunStopped` for them."""
    _thread_stop.stop = stop
    try:
        yield
    finally:
        del _thread_stop.stop


def run(
    session: ort.InferenceSession, outputs: Sequence[str] | None, feed: dict[str, np.ndarray], release: IdleRelease
) -> list:
    """One model run, with ONNX Runtime's arena shrunk after it, counted by ``release``.

    Inside a ranked run or a claim below first words (`voicestream.cpus.CpuUse.interruptible`)
    the run first waits while another listener's first words go (`CpuUse.wait_turn`), and
    can be stopped by such first words claiming the cores; it is then made again, the same
    inputs giving the same output, after the same wait, at most `MAX_INTERRUPTIONS` times.
    Inside `stopping`, a stop raises `RunStopped`."""
    stop: RunStop | None = getattr(_thread_stop, "stop", None)
    stoppable_here = CPU_USE.may_stop_here
    for attempt in itertools.count():
        if stoppable_here:
            CPU_USE.wait_turn(stopped=attempt > 0)  # bounded: the last attempt waits too, then goes
        interruptible = stoppable_here and attempt < MAX_INTERRUPTIONS
        if not interruptible and stop is None:
            with release.running(session):
                return session.run(outputs, feed, _shrinking_run_options())
        options = new_run_options()  # its own: its terminate stops this run alone
        try:
            with (
                CPU_USE.interruptible(options) if interruptible else contextlib.nullcontext(),
                stop.covering(options) if stop is not None else contextlib.nullcontext(),
                release.running(session),
            ):
                return session.run(outputs, feed, options)
        except RunStopped:
            raise
        except Exception:
            if not options.terminate:  # a failure of the run itself, not a stop
                raise
            if stop is not None and stop.stopped:
                raise RunStopped("the run's request ended while it rendered") from None
    raise AssertionError("unreachable: the loop returns or raises")
