"""Where speech pauses in some audio: the markup tests measure a ``<break>`` with it."""

from __future__ import annotations

import numpy as np

from voicestream.audio.audible import AUDIBLE_DBFS, AUDIBLE_WINDOW_S, first_audible_sample


def quiet_runs(audio: np.ndarray, sample_rate: int) -> list[tuple[float, float]]:
    """The runs of ``audio`` no audible window covers (the engine's own measure of sound: a
    20 ms window at -40 dBFS, `voicestream.audio.audible`), as (start, length) in seconds,
    between the first sound and the last."""
    samples = np.asarray(audio, dtype=np.float64).ravel()
    window = round(sample_rate * AUDIBLE_WINDOW_S)
    if samples.size < window:
        return []
    energy = np.concatenate([[0.0], np.cumsum(samples * samples)])
    loud = (energy[window:] - energy[:-window]) / window >= 10 ** (AUDIBLE_DBFS / 10) * (1 - 1e-9)
    covered = np.zeros(samples.size + 1, dtype=np.int64)
    starts = np.flatnonzero(loud)
    np.add.at(covered, starts, 1)
    np.add.at(covered, starts + window, -1)
    heard = np.cumsum(covered)[:-1] > 0
    edges = np.flatnonzero(np.diff(heard.astype(np.int8)))
    runs = []
    quiet_starts = [i + 1 for i in edges if heard[i] and i + 1 < samples.size]
    for start in quiet_starts:
        following = np.flatnonzero(heard[start:])
        if following.size:
            runs.append((start / sample_rate, following[0] / sample_rate))
    return runs


def longest_pause_s(audio: np.ndarray, sample_rate: int) -> float:
    """The longest quiet run between two sounds of ``audio``, in seconds."""
    return max((length for _, length in quiet_runs(audio, sample_rate)), default=0.0)


def speech_s(audio: np.ndarray, sample_rate: int) -> float:
    """Seconds from the first audible window's start to the last's end."""
    samples = np.asarray(audio, dtype=np.float64).ravel()
    first = first_audible_sample(samples, sample_rate)
    last = first_audible_sample(samples[::-1], sample_rate)
    return 0.0 if first is None or last is None else (samples.size - last - first) / sample_rate
