"""Silence trimming where two pieces of one request meet.

Kokoro pads each run with silence; joined as they are, sentences would be separated by
uneven gaps. Each join is trimmed to the speech and given a fixed pause instead.
"""

from __future__ import annotations

import numpy as np

PAUSE_AFTER_SENTENCE_S = 0.25
PAUSE_AFTER_CLAUSE_S = 0.1
_FRAME_S = 0.01
_THRESHOLD_DB = -40.0
_MARGIN_S = 0.02


def trim_silence(audio: np.ndarray, sample_rate: int, head: bool = True, tail: bool = True) -> np.ndarray:
    """Cut silence (frames quieter than -40 dB of the peak) at the head and/or tail, keeping 20 ms."""
    start, end = speech_bounds(audio, sample_rate, head, tail)
    return audio if (start, end) == (0, audio.size) else audio[start:end]


def speech_bounds(audio: np.ndarray, sample_rate: int, head: bool = True, tail: bool = True) -> tuple[int, int]:
    """The samples `trim_silence` keeps, as (start, end): word times shift by ``start``."""
    if not (head or tail) or audio.size == 0:
        return 0, audio.size
    frame = max(1, int(sample_rate * _FRAME_S))
    frames = audio[: audio.size // frame * frame].reshape(-1, frame)
    if frames.size == 0:
        return 0, audio.size
    rms = np.sqrt(np.mean(frames.astype(np.float64) ** 2, axis=1))
    peak = rms.max()
    if peak <= 0:
        return 0, 0
    loud = np.flatnonzero(rms >= peak * 10 ** (_THRESHOLD_DB / 20))
    margin = int(sample_rate * _MARGIN_S)
    start = max(0, loud[0] * frame - margin) if head else 0
    end = min(audio.size, (loud[-1] + 1) * frame + margin) if tail else audio.size
    return int(start), int(end)
