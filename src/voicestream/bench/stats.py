"""Summaries of repeated timings, in milliseconds, as the bench tables show them."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (``fraction`` 0.95 for p95): a value that was measured."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


@dataclass(frozen=True)
class Timings:
    """Mean, median, p95, min and max of timings given in seconds, reported in ms."""

    mean_ms: float
    median_ms: float
    p95_ms: float
    min_ms: float
    max_ms: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Timings:
        ms = [value * 1000 for value in seconds]
        return cls(statistics.mean(ms), statistics.median(ms), percentile(ms, 0.95), min(ms), max(ms))

    def cells(self) -> list[float]:
        """Mean, median, min, max: the columns of a small-sample table (p95 needs more trials)."""
        return [self.mean_ms, self.median_ms, self.min_ms, self.max_ms]
