"""The first sound a listener hears: where audio stops being silence, and when it plays.

First audio (the first byte) is what a server controls; the first *audible* sound is what a
listener waits for. Kokoro opens every run with a few hundred milliseconds of near-silence,
so the two differ. Audible means a 20 ms window whose RMS reaches -40 dBFS, measured against
full scale (1.0), not against the clip's own peak: a whisper-quiet clip stays inaudible, and
the answer does not depend on what comes later in the stream.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

AUDIBLE_WINDOW_S = 0.02
AUDIBLE_DBFS = -40.0


def first_audible_sample(
    samples: npt.ArrayLike, sample_rate: int, window_s: float = AUDIBLE_WINDOW_S, threshold_dbfs: float = AUDIBLE_DBFS
) -> int | None:
    """The offset of the first ``window_s`` window (any start sample) whose RMS reaches
    ``threshold_dbfs``; None when no full window does (silence, or audio shorter than a window)."""
    audio = np.asarray(samples, dtype=np.float64).ravel()
    window = max(1, round(sample_rate * window_s))
    if audio.size < window:
        return None
    energy = np.concatenate([[0.0], np.cumsum(audio * audio)])
    mean_square = (energy[window:] - energy[:-window]) / window
    loud = np.flatnonzero(mean_square >= 10 ** (threshold_dbfs / 10) * (1 - 1e-9))
    return int(loud[0]) if loud.size else None


def heard_at_s(chunks: Sequence[tuple[float, int]], offset: int, sample_rate: int) -> float:
    """When a player hears sample ``offset`` of a stream that came as ``chunks`` of
    (arrival seconds, sample count): it starts at the first chunk's arrival and, when the next
    chunk is late, waits for it (an underrun), as the pages' player does."""
    clock = None  # when sample 0 would play, given the stalls so far
    start = 0
    for arrival, count in chunks:
        clock = arrival if clock is None else max(clock, arrival - start / sample_rate)
        if offset < start + count:
            return clock + offset / sample_rate
        start += count
    raise ValueError(f"sample {offset} is past the {start} samples of the stream")


class FirstSound:
    """Chunks of one stream as they arrive; says when the listener first hears something.

    Feed every chunk with its arrival time (seconds from the request); `heard_s` is set,
    counted the same way, once a chunk completes the first audible window.
    """

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self.first_audio_s: float | None = None
        self.heard_s: float | None = None
        self.silence_s: float | None = None
        """The silence before the first audible window, within the audio."""
        self._chunks: list[tuple[float, int]] = []
        self._audio: list[np.ndarray] = []

    def feed(self, arrival_s: float, samples: npt.ArrayLike) -> float | None:
        """Add one chunk; the heard time once known (then further chunks change nothing)."""
        chunk = np.asarray(samples, dtype=np.float32).ravel()
        if self.heard_s is not None or chunk.size == 0:
            return self.heard_s
        if self.first_audio_s is None:
            self.first_audio_s = arrival_s
        self._chunks.append((arrival_s, chunk.size))
        self._audio.append(chunk)
        offset = first_audible_sample(np.concatenate(self._audio), self.sample_rate)
        if offset is not None:
            self.silence_s = offset / self.sample_rate
            self.heard_s = heard_at_s(self._chunks, offset, self.sample_rate)
            self._audio.clear()
        return self.heard_s
