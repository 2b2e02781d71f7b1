"""How long a piece takes to render on this machine: the scheduler's own measure of its runs.

The scheduling policy (`voicestream.speech.policy`) weighs each listener's audio left to play
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
PRIOR_AUDIO_S_PER_PHONEME = 0.056
"""Before any run: one English phoneme's audio at speed 1 here (2.8 s of audio for 50 phonemes,
4.6 s for 83: `bench transport`'s long answer); the first runs replace it."""
WEIGHT = 0.3
"""How much each new run moves the estimate (an exponential moving average)."""


@dataclass(frozen=True)
class PaceTable:
    """The estimates at one moment: seconds of rendering per phoneme at speed 1, per thread count."""

    per_phoneme: tuple[tuple[int, float], ...] = ()
    audio_per_phoneme: float = PRIOR_AUDIO_S_PER_PHONEME
    """Seconds of audio a phoneme makes at speed 1, from the runs so far."""

    @property
    def measured(self) -> bool:
        """Whether any run was measured: False right after a start, when every figure is a prior."""
        return bool(self.per_phoneme)

    def predict(self, phonemes: int, speed: float, threads: int) -> float:
        """Seconds a whole render of ``phonemes`` at ``speed`` on ``threads`` should take."""
        return self.rate(threads) * phonemes / max(speed, 1e-3)

    def rate(self, threads: int) -> float:
        """Seconds per phoneme at speed 1 on ``threads``. A thread count with no run yet is
        predicted from the nearest that has one as if the work split evenly over the threads
        (one thread measured 1.65 to 1.8 times two threads' time here: a little slow, never
        fast); before any run, the prior."""
        known = dict(self.per_phoneme)
        if threads in known or not known:
            return known.get(threads, PRIOR_S_PER_PHONEME)
        nearest = min(known, key=lambda count: (abs(count - threads), count))
        return known[nearest] * nearest / threads

    def render_per_audio(self, threads: int) -> float:
        """Seconds of rendering a second of audio takes on ``threads`` (the speed cancels out)."""
        return self.rate(threads) / self.audio_per_phoneme


class RenderPace:
    """Seconds of rendering per phoneme at speed 1, per thread count, from the runs so far
    (safe to record from any thread)."""

    def __init__(self) -> None:
        self._per_phoneme: dict[int, float] = {}
        self._audio_per_phoneme: float | None = None
        """None until a run says how much audio it made."""
        self._lock = threading.Lock()

    def table(self) -> PaceTable:
        """A frozen copy of the estimates, for the policy."""
        with self._lock:
            audio = PRIOR_AUDIO_S_PER_PHONEME if self._audio_per_phoneme is None else self._audio_per_phoneme
            return PaceTable(tuple(sorted(self._per_phoneme.items())), audio)

    def predict(self, phonemes: int, speed: float, threads: int) -> float:
        """Seconds a whole render of ``phonemes`` at ``speed`` on ``threads`` should take."""
        return self.table().predict(phonemes, speed, threads)

    def record(self, phonemes: int, speed: float, threads: int, seconds: float, audio_s: float = 0.0) -> None:
        """A render of ``phonemes`` at ``speed`` on ``threads`` took ``seconds`` and made
        ``audio_s`` of audio (0: not known)."""
        if phonemes <= 0 or seconds <= 0:
            return
        with self._lock:
            self._per_phoneme[threads] = _moved(self._per_phoneme.get(threads), seconds * speed / phonemes)
            if audio_s > 0:
                self._audio_per_phoneme = _moved(self._audio_per_phoneme, audio_s * speed / phonemes)


def _moved(known: float | None, observed: float) -> float:
    """An estimate moved by `WEIGHT` of the way to a new observation (the first sets it)."""
    return observed if known is None else known + WEIGHT * (observed - known)
