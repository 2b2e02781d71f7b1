"""How long a piece takes to render on this machine: the scheduler's own measure of its runs.

The scheduler vocodes a piece window by window (`voicestream.engine.vocoder`) when its
listener would otherwise run out of audio before the piece is rendered whole: a silent
listener always, a playing one when what it has left to play is shorter than the piece's
render. That needs the render's length before the run; it is predicted from the piece's
phonemes and the seconds per phoneme that the runs so far took on the same thread count
(renders scale with the audio's frames, so with phonemes over speed).
"""

from __future__ import annotations

PRIOR_S_PER_PHONEME = 0.03
"""Before any run: about one two-core machine's single-threaded int8 render (2.0 s for an
83-phoneme sentence, docs/BENCHMARKS.md); the first runs replace it."""
WEIGHT = 0.3
"""How much each new run moves the estimate (an exponential moving average)."""


class RenderPace:
    """Seconds of rendering per phoneme at speed 1, per thread count, from the runs so far."""

    def __init__(self) -> None:
        self._per_phoneme: dict[int, float] = {}

    def predict(self, phonemes: int, speed: float, threads: int) -> float:
        """Seconds a whole render of ``phonemes`` at ``speed`` on ``threads`` should take."""
        return self._per_phoneme.get(threads, PRIOR_S_PER_PHONEME) * phonemes / max(speed, 1e-3)

    def record(self, phonemes: int, speed: float, threads: int, seconds: float) -> None:
        """A render of ``phonemes`` at ``speed`` on ``threads`` took ``seconds``."""
        if phonemes <= 0 or seconds <= 0:
            return
        observed = seconds * speed / phonemes
        known = self._per_phoneme.get(threads)
        self._per_phoneme[threads] = observed if known is None else known + WEIGHT * (observed - known)
