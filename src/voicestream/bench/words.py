"""``voicestream bench words``: how well the word timestamps fall, per language.

Whisper's own word times are a noisy ruler (tiny.en agrees with the model's durations
within a median of 70 to 90 ms, base is offset by about 150 ms), so the main measure is a
**cut test**: cut the audio at a reported word start and transcribe each side; the cut
passes when the word before is the last word heard on the left and the word itself the
first heard on the right. The start error against Whisper's word timestamps is reported
beside it. English is heard by tiny.en, other languages by the multilingual Whisper base
(the dev group's packages). Words compare lower-cased without punctuation; Chinese by
toneless pinyin and Japanese by kana reading of the character at the cut, so that the
script Whisper picks does not count.
"""

from __future__ import annotations

import re
import statistics
import unicodedata
from collections.abc import Sequence
from difflib import SequenceMatcher
from typing import Any

import numpy as np

from voicestream.audio import resample
from voicestream.bench.asr import WHISPER_RATE, load_whisper_base, whisper_model
from voicestream.bench.report import Report, Table, machine_context, progress
from voicestream.bench.texts import WORD_SENTENCES
from voicestream.engine import KokoroEngine, offline
from voicestream.engine.alignment import TimedWord

WHISPER_LANGUAGE = {"en-us": "en", "en-gb": "en", "es": "es", "fr-fr": "fr", "it": "it", "pt-br": "pt", "hi": "hi", "ja": "ja", "zh": "zh"}
ENGLISH_TARGET = 0.65


def units(text: str, language: str) -> list[str]:
    """What a cut compares: words, or per character readings for Chinese and Japanese."""
    text = unicodedata.normalize("NFKC", text).lower()
    if language == "zh":
        from pypinyin import Style, lazy_pinyin

        return lazy_pinyin("".join(re.findall(r"[\u4e00-\u9fff]", text)), style=Style.NORMAL)
    if language == "ja":
        import pyopenjtalk

        return list(re.sub(r"[^\u30a0-\u30ff]", "", pyopenjtalk.g2p(text, kana=True)))
    return re.sub(r"[^\w\s]|_", "", text).split()


def _hear(whisper: Any, audio: np.ndarray, language: str, words: bool = False) -> tuple[str, list[Any]]:
    samples = resample(audio.astype(np.float32), 24_000, WHISPER_RATE)
    segments, _ = whisper.transcribe(samples, language=WHISPER_LANGUAGE[language], beam_size=1, word_timestamps=words)
    segments = list(segments)
    return " ".join(s.text.strip() for s in segments), [w for s in segments for w in (s.words or [])]


def cut_passes(whisper: Any, audio: np.ndarray, words: Sequence[TimedWord], index: int, language: str) -> bool:
    """Whether cutting ``audio`` at word ``index``'s start splits it from the word before."""
    cut = int(words[index].start_s * 24_000)
    left, _ = _hear(whisper, audio[:cut], language)
    right, _ = _hear(whisper, audio[cut:], language)
    heard_left, heard_right = units(left, language), units(right, language)
    before, word = units(words[index - 1].word, language), units(words[index].word, language)
    if not (before and word and heard_left and heard_right):
        return False
    return heard_left[-1] == before[-1] and heard_right[0] == word[0]


def start_errors(whisper: Any, audio: np.ndarray, words: Sequence[TimedWord], language: str) -> list[float]:
    """|our start − Whisper's| in ms, for the words both name the same way (in order)."""
    _, heard = _hear(whisper, audio, language, words=True)
    ours = [" ".join(units(w.word, language)) for w in words]
    theirs = [" ".join(units(w.word, language)) for w in heard]
    errors = []
    for block in SequenceMatcher(None, ours, theirs, autojunk=False).get_matching_blocks():
        for k in range(block.size):
            if ours[block.a + k]:
                errors.append(abs(words[block.a + k].start_s - heard[block.b + k].start) * 1000)
    return errors


def _cut_indices(count: int, cuts: int) -> list[int]:
    """Up to ``cuts`` word indices (never the first word), spread evenly over the words."""
    candidates = list(range(1, count))
    if len(candidates) <= cuts:
        return candidates
    return [candidates[round(i * (len(candidates) - 1) / max(cuts - 1, 1))] for i in range(cuts)]


def measure_words(engine: KokoroEngine, languages: Sequence[str], cuts: int = 12) -> Report:
    """Synthesize each language's sentences with word times, then cut and listen."""
    table = Table(
        "Word timestamps: cut test and start error against Whisper, per language",
        ["language", "voice", "words", "cuts", "cut test passed", "pass rate", "Whisper", "start error ms (median)", "words matched"],
    )
    context = machine_context()
    base = None
    with progress("bench words", len(languages) * (cuts + 1)) as advance:
        for language in languages:
            voice, text = WORD_SENTENCES[language]
            if language.startswith("en"):
                whisper, ruler = whisper_model(), "tiny.en"
            else:
                base = base or load_whisper_base()
                whisper, ruler = base, "base"
            pieces = list(offline.stream(engine, text, voice, words=True))
            audio = np.concatenate([p.audio for p in pieces])
            words = [w for p in pieces for w in p.words]
            indices = _cut_indices(len(words), cuts)
            passed = 0
            for index in indices:
                passed += cut_passes(whisper, audio, words, index, language)
                advance()
            errors = start_errors(whisper, audio, words, language)
            advance()
            table.add(
                language, voice, len(words), len(indices), passed, f"{passed / max(len(indices), 1):.0%}", ruler,
                round(statistics.median(errors)) if errors else None, len(errors),
            )
    english = [row for row in table.rows if str(row[0]).startswith("en")]
    if english:
        rate = sum(int(row[4]) for row in english) / max(sum(int(row[3]) for row in english), 1)  # type: ignore[arg-type]
        table.note = f"English cut test {rate:.0%} (target ≥ {ENGLISH_TARGET:.0%})."
    return Report("words", tables=[table], context={**context, "cuts per language": cuts})
