"""Does it sound right? Whisper tiny.en transcribes the real model's speech."""

from __future__ import annotations

import re

import pytest
from tests.asr import transcribe_samples, word_error_rate, words

from voicestream.engine.offline import synthesize

SENTENCES = [
    "Hello there, how are you today?",
    "Can you send the report to Maria before Friday?",
    "We shipped seven hundred packages last week.",
    "My favourite colour is blue, and my sister likes green.",
    "John and Sarah moved to Chicago in the spring.",
    "Thank you for calling, have a wonderful evening.",
]
"""Six sentences, 48 words: a question, names, a number, a list of clauses. Speech that is
not understood fails by far more than the 15% allowed (seven words of 48)."""


def test_word_error_rate_of_varied_sentences(engine, whisper) -> None:
    references, hypotheses = [], []
    for sentence in SENTENCES:
        audio = synthesize(engine, sentence, "af_heart")
        references.append(sentence)
        hypotheses.append(transcribe_samples(whisper, audio, engine.sample_rate))
    errors = sum(word_error_rate(r, h) * len(words(r)) for r, h in zip(references, hypotheses, strict=True))
    total = sum(len(words(r)) for r in references)
    assert errors / total <= 0.15, list(zip(references, hypotheses, strict=True))


@pytest.mark.parametrize(("written", "heard"), [
    ("It costs $29.95 today.", r"\$ ?29\.95|29 dollars"),
    ("The ratio is 3.5 now.", r"3\.5|3 point 5|three point five"),
    ("We meet on Jan. 5 again.", r"january (5|fifth)"),
    ("Dr. Smith will see you.", r"(dr\.?|doctor) smith"),
])
def test_numbers_and_abbreviations_come_out_as_words(engine, whisper, written: str, heard: str) -> None:
    """The normalizer's rewrites reach the listener: Whisper hears the amount, date or title."""
    transcript = transcribe_samples(whisper, synthesize(engine, written), engine.sample_rate).lower()
    assert re.search(heard, transcript), (written, transcript)
