"""espeak-ng through phonemizer takes time linear in the text, with the same phonemes.

phonemizer splits and rejoins a line once per punctuation mark, so a long line full of
marks ("1,1,1,...") cost seconds; the G2P hands it long texts in pieces cut after marks.
Timing is judged by the CPU time of the test's thread: eight times the length (2 500 to
20 000 characters) costs less than twenty times the CPU, where a linear cost gives about
eight and the old quadratic one sixty-four; a doubling was too close to call (CI once saw
3.6x for "a. " at a doubling, from cache noise alone). The bound is 2 s at 20 000
characters: espeak-ng itself needs about 0.3 s of CPU for such a text; before the
pieces, "1,1,1,..." took 1.6 s and four times as long at each doubling of its length.
"""

from __future__ import annotations

import time

import pytest

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
    def cpu_time(text: str) -> float:
        start = time.thread_time()
        phonemizer.phonemize(text)
        return time.thread_time() - start

    eighth, whole = (unit * (2_500 // len(unit) + 1))[:2_500], (unit * (20_000 // len(unit) + 1))[:20_000]
    small, big = min(cpu_time(eighth) for _ in range(3)), min(cpu_time(whole) for _ in range(3))
    assert big < 20 * small + 0.05, f"{unit!r}: {small:.3f} s, then {big:.3f} s at eight times the length"
    assert big < 2.0
