"""How a model derived from another (`voicestream.engine.derive`) sounds beside its source:
what ``voicestream models derive`` reports after it derives one, on the engine's own plan of
a few sentences and the voice packs of the source.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voicestream.engine.graph import load_graph
from voicestream.engine.kokoro import KokoroEngine, session_options
from voicestream.engine.weights import ModelFiles

VERIFY_TEXTS = (
    "Hello there, how are you doing today?",
    "The quick brown fox jumps over the lazy dog.",
    "It costs five dollars, said Doctor Lee, and the train leaves at noon.",
)


@dataclass(frozen=True)
class Similarity:
    """How a derived model's audio compares with its source's, on the same phonemes.

    Whole waveforms cannot be compared sample by sample: one token a frame longer shifts
    every later sample. So the durations are compared token by token, and the vocoder of
    each model is run on the *source's* features, where the waveforms line up."""

    tokens_same: float
    """Share of tokens whose predicted duration (in frames) is the source's."""
    length_ratio: float
    """The derived model's total frames over the source's (worst sentence)."""
    vocoder_correlation: float
    """Pearson correlation of the two vocoders' waveforms from the same features (worst sentence)."""


def similarity(derived: Path, source: Path, voices_dir: Path, texts: Iterable[str] = VERIFY_TEXTS) -> Similarity:
    """Compare the model at ``derived`` with the one at ``source`` on ``texts`` (CPU, one thread)."""
    import onnxruntime as ort

    engine = KokoroEngine(ModelFiles(source, voices_dir, "source"), max_threads=1, first_window_s=0)
    halves = []
    for path in (source, derived):
        split = load_graph(path).split
        if split is None:
            raise ValueError(f"{path}: the graph has no vocoder cut to compare at")
        # One thread that sleeps when idle, as the engine's: ONNX Runtime's default is a
        # spinning thread per core, which took CPU from whatever ran beside the check.
        halves.append([
            ort.InferenceSession(half, session_options(1), providers=["CPUExecutionProvider"])
            for half in (split.front, split.vocoder)
        ])
    same = total = 0
    ratios, correlations = [], []
    for text in texts:
        feed = engine.model_inputs(next(engine.plan(text)), engine.voices[0], 1.0)
        assert feed is not None, "the verification texts are speakable"
        fronts = [front.run(None, feed) for front, _ in halves]
        names = [output.name for output in halves[0][0].get_outputs()]
        durations = [outputs[-1].ravel() for outputs in fronts]
        same += int(np.sum(durations[0] == durations[1]))
        total += durations[0].size
        ratios.append(float(durations[1].sum() / durations[0].sum()))
        vocoder_feed = {vocoder_input.name: fronts[0][names.index(vocoder_input.name)] for vocoder_input in halves[0][1].get_inputs()}
        audio = [vocoder.run(None, vocoder_feed)[0].ravel().astype(np.float64) for _, vocoder in halves]
        correlations.append(float(np.corrcoef(audio[0], audio[1])[0, 1]))
    return Similarity(same / total, max(ratios, key=lambda ratio: abs(ratio - 1)), min(correlations))
