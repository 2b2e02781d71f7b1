"""``voicestream bench rtf``: the engine's real-time factor for short, medium and long inputs."""

from __future__ import annotations

import statistics
import time

from voicestream.bench.table import markdown_table
from voicestream.bench.texts import RTF_INPUTS
from voicestream.engine import KokoroEngine


def measure_rtf(engine: KokoroEngine, trials: int = 3, voice: str = "af_heart") -> str:
    """Synthesize each input ``trials`` times; RTF = synthesis time / audio time (lower is faster)."""
    rows = []
    for name, text in RTF_INPUTS.items():
        rtfs, firsts, audio_s = [], [], 0.0
        for _ in range(trials):
            started = time.perf_counter()
            first = None
            samples = 0
            for chunk in engine.stream(text, voice):
                first = first if first is not None else time.perf_counter() - started
                samples += chunk.size
            elapsed = time.perf_counter() - started
            audio_s = samples / engine.sample_rate
            rtfs.append(elapsed / audio_s)
            firsts.append(first or elapsed)
        rows.append([name, len(text), audio_s, statistics.median(firsts) * 1000, statistics.median(rtfs), min(rtfs)])
    return markdown_table(
        ["input", "chars", "audio s", "first chunk ms (median)", "RTF median", "RTF best"], rows
    )
