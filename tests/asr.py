"""Speech recognition for quality checks: the agent's Whisper (voice input), the multilingual
Whisper base, and word error rate."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from voicestream.agent import speech_input
from voicestream.audio import pcm16_to_float, resample
from voicestream.bench.asr import load_whisper_base
from voicestream.bench.wer import edit_distance

__all__ = ["load_whisper_base"]  # the tests' Whisper base is the bench's


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
