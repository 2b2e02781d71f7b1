"""How long a piece takes to render on this machine: the scheduler's own measure of its runs.

The scheduling policy (`voicestream.server.policy`) weighs each listener's audio left to play
against the render of the piece it needs next, so it needs that render's length before the
run; it is predicted from the piece's phonemes and the seconds per phoneme that the runs so
far took on the same thread count (renders scale with the audio's frames, so with phonemes
over speed). Workers record their runs from their threads while the event loop takes frozen
copies (`PaceTable`) for the policy: the estimates are kept under a lock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

PRIOR_S_PER_PHONEME = 0.03
"""Before any run: about one two-core machine's single-threaded int8 render (2.0 s for an
83-phoneme sentence, docs/BENCHMARKS.md); the first runs replace it."""
WEIGHT = 0.3
"""How much each new run moves the estimate (an exponential moving average)."""


@dataclass(frozen=True)
class PaceTable:
    """The estimates at one moment: seconds of rendering per phoneme at speed 1, per thread count."""

    per_phoneme: tuple[tuple[int, float], ...] = ()

    def predict(self, phonemes: int, speed: float, threads: int) -> float:
        """Seconds a whole render of ``phonemes`` at ``speed`` on ``threads`` should take."""
        rate = dict(self.per_phoneme).get(threads, PRIOR_S_PER_PHONEME)
        return rate * phonemes / max(speed, 1e-3)


class RenderPace:
    """Seconds of rendering per phoneme at speed 1, per thread count, from the runs so far
    (safe to record from any thread)."""

    def __init__(self) -> None:
        self._per_phoneme: dict[int, float] = {}
        self._lock = threading.Lock()

    def table(self) -> PaceTable:
        """A frozen copy of the estimates, for the policy."""
        with self._lock:
            return PaceTable(tuple(sorted(self._per_phoneme.items())))

    def predict(self, phonemes: int, speed: float, threads: int) -> float:
        """Seconds a whole render of ``phonemes`` at ``speed`` on ``threads`` should take."""
        return self.table().predict(phonemes, speed, threads)

    def record(self, phonemes: int, speed: float, threads: int, seconds: float) -> None:
        """A render of ``phonemes`` at ``speed`` on ``threads`` took ``seconds``."""
        if phonemes <= 0 or seconds <= 0:
            return
        observed = seconds * speed / phonemes
        with self._lock:
            known = self._per_phoneme.get(threads)
            self._per_phoneme[threads] = observed if known is None else known + WEIGHT * (observed - known)
