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
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import onnxruntime as ort

RELEASE_AFTER_ENV = "VOICESTREAM_RELEASE_AFTER_S"
DEFAULT_RELEASE_AFTER_S = 1.0
"""Seconds without a model run before the heap is handed back (``VOICESTREAM_RELEASE_AFTER_S``;
0 never hands it back). Longer than the gap between one request's pieces, so that a stream
of speech never waits for a release nor faults its pages in again."""


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


@functools.cache
def _shrinking_run_options() -> ort.RunOptions:
    """Run options that hand the CPU arena's memory back after each run.

    ONNX Runtime's arena keeps the largest buffers each input length ever needed, so a
    server's memory only ratcheted up with every new sentence length (measured, two passes
    over four texts: 407 -> 1,196 MB); shrinking after each run keeps it flat (433 -> 434 MB)
    at the arena's speed within a run (CPU time 45.0 s against 41.2 s, within this machine's
    noise; no arena at all cost 61.6 s; a one-off script, not a bench). Made once: every
    run shares it. See docs/RELIABILITY.md.
    """
    import onnxruntime as ort

    options = ort.RunOptions()
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return options


class IdleRelease:
    """Counts the model runs going on in this process (malloc's heap is the process's, whichever
    engine runs) and calls `release_heap` once none has started or ended for ``after_s``:
    once per quiet spell, from one daemon thread started with the first run."""

    def __init__(self, after_s: float) -> None:
        self.after_s = after_s
        self.releases = 0
        """Times the heap was handed back (a test waits on it)."""
        self._running = 0
        self._events = 0  # runs started or ended: a quiet spell is one in which it stays put
        self._ran_since_release = False
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Around one model run."""
        with self._changed:
            self._running += 1
            self._events += 1
            self._ran_since_release = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._release_when_quiet, name="memory-release", daemon=True)
                self._thread.start()
            self._changed.notify_all()
        try:
            yield
        finally:
            with self._changed:
                self._running -= 1
                self._events += 1
                self._changed.notify_all()

    def _release_when_quiet(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(self._idle_after_runs)
                if not self._stays_quiet():
                    continue
                self._ran_since_release = False
            release_heap()
            with self._changed:
                self.releases += 1
                self._changed.notify_all()

    def _idle_after_runs(self) -> bool:
        return self._ran_since_release and self._running == 0 and self.after_s > 0

    def _stays_quiet(self) -> bool:
        """Whether no run starts or ends for ``after_s`` (called holding the lock)."""
        seen = self._events
        return not self._changed.wait_for(lambda: self._events != seen, timeout=self.after_s)


def _release_after_s() -> float:
    """``VOICESTREAM_RELEASE_AFTER_S``; a value that is not a number is logged once and the
    default used (the engine is imported at start: a typo must not stop the server)."""
    configured = os.environ.get(RELEASE_AFTER_ENV)
    if not configured:
        return DEFAULT_RELEASE_AFTER_S
    try:
        return max(0.0, float(configured))
    except ValueError:
        logging.getLogger(__name__).warning(
            "%s=%r is not a number of seconds; using %g", RELEASE_AFTER_ENV, configured, DEFAULT_RELEASE_AFTER_S
        )
        return DEFAULT_RELEASE_AFTER_S


IDLE_RELEASE = IdleRelease(_release_after_s())
"""The process's one idle release: every engine's runs are counted by it."""


def run(session: ort.InferenceSession, outputs: Sequence[str] | None, feed: dict[str, np.ndarray]) -> list:
    """One model run, with ONNX Runtime's arena shrunk after it, counted by `IDLE_RELEASE`."""
    with IDLE_RELEASE.running():
        return session.run(outputs, feed, _shrinking_run_options())
