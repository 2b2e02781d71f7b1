"""espeak-ng through phonemizer takes time linear in the text, with the same phonemes.

phonemizer splits and rejoins a line once per punctuation mark, so a long line full of
marks ("1,1,1,...") cost seconds; the G2P hands it long texts in pieces cut after marks.
Timing is judged by the CPU time of the test's thread: eight times the length (2 500 to
20 000 characters) costs less than twenty times the CPU, where a linear cost gives about
eight and the old quadratic one sixty-four; a doubling was too close to call (CI once saw
3.6x for "a. " at a doubling, from cache noise alone). And 20 000 characters of marks
must cost less than eight times as much as 20 000 characters of ordinary prose, timed in
turn with them (the worst here, "1. ", costs three times; before the pieces, "1,1,1,..."
took 1.6 s, fourteen times the prose's 0.11 s, and four times as long at each doubling of
its length): a bound on the machine's own scale, where one in seconds fails on a slow
machine (a CI run failed the normalizer's 250 ms that way).
"""

from __future__ import annotations

import pytest
from tests.thread_cpu import best_cpu_times

from voicestream.engine.phonemes import MAX_ESPEAK_CHARS, Phonemizer

LONG_TEXT = " ".join(
    [
        'He said, "Hello, world." Then: she left; nobody knew why! Did they? Yes... (maybe) or not.',
        "Doctor Smith paid 29 dollars 95 cents on January 5, 2024, at 10 AM; it was cold.",
        "The rain in Spain stays mainly in the plain, they say, though nobody has measured it.",
    ]
    * 8
)


@pytest.fixture(scope="module")
def phonemizer() -> Phonemizer:
    return Phonemizer()


def test_a_long_text_has_the_phonemes_of_one_call(phonemizer: Phonemizer) -> None:
    assert len(LONG_TEXT) > 3 * MAX_ESPEAK_CHARS
    whole = phonemizer.g2p("en-us")._backend.phonemize([LONG_TEXT], strip=True)[0]
    expected = " ".join("".join(p for p in whole if p in phonemizer.vocab).split())
    assert phonemizer.phonemize(LONG_TEXT, "en-us") == expected


@pytest.mark.parametrize("unit", ["1,1,", "a.a.", "e.g.", "a. ", "1. ", "[[a](x)"])
def test_phonemizing_marks_is_linear(phonemizer: Phonemizer, unit: str) -> None:
    eighth, whole = (unit * (2_500 // len(unit) + 1))[:2_500], (unit * (20_000 // len(unit) + 1))[:20_000]
    prose_text = (LONG_TEXT * (20_000 // len(LONG_TEXT) + 1))[:20_000]
    small, big, prose = best_cpu_times(phonemizer.phonemize, (eighth, whole, prose_text))  # in turn: noise hits all
    assert big < 20 * small + 0.05, f"{unit!r}: {small:.3f} s, then {big:.3f} s at eight times the length"
    assert big < 8 * prose + 0.05, f"{unit!r}: {big:.3f} s at 20 000 characters, against {prose:.3f} s for prose"
