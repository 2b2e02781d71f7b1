"""Token durations to word times, without the model: alignment, timing, shifting."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicestream.engine.alignment import (
    FRAME_S,
    NO_WORD,
    PieceWords,
    TimedWord,
    label_phonemes,
    offset_words,
    shift_words,
    time_words,
)


def test_words_espeak_joins_are_split_back() -> None:
    phonemes = "ʌvðə pˈiːpəl,"
    labels = label_phonemes(phonemes, ["ʌv", "ðə", "pˈiːpəl,"])
    assert labels == [0, 0, 1, 1, NO_WORD, *[2] * 7, NO_WORD]


def test_labels_never_go_back_even_when_spellings_differ() -> None:
    labels = label_phonemes("ɪɾ ɪz ɐ kˈæt.", ["ɪt", "ɪz", "ˈeɪ", "kˈæt."])
    sounds = [label for label in labels if label != NO_WORD]
    assert sounds == sorted(sounds)
    assert set(sounds) == {0, 1, 2, 3}


def test_times_follow_kokoro_conventions() -> None:
    # "ab cd": start token 10 frames, a=2 b=2 space=4 c=2 d=2, end token 6.
    words = PieceWords(texts=("ab", "cd"), labels=(0, 0, NO_WORD, 1, 1))
    first, second = time_words(words, "ab cd", [10, 2, 2, 4, 2, 2, 6])
    assert first.start_s == pytest.approx((10 - 3) * FRAME_S)  # three frames before the start token ends
    assert first.end_s == pytest.approx((14 + 2 - 3) * FRAME_S) == second.start_s  # the space cut in half
    assert second.end_s == pytest.approx((22 - 3) * FRAME_S)


def test_punctuation_is_a_gap_between_words() -> None:
    words = PieceWords(texts=("a,", "b"), labels=(0, NO_WORD, NO_WORD, 1))
    first, second = time_words(words, "a, b", [4, 2, 8, 2, 2, 4])
    assert second.start_s - first.end_s == pytest.approx((8 + 1) * FRAME_S)


def test_a_word_without_sounds_gets_an_empty_span_in_place() -> None:
    words = PieceWords(texts=("a", "—", "b"), labels=(0, NO_WORD, 2))
    a, dash, b = time_words(words, "a—b", [4, 2, 2, 2, 4])
    assert a.end_s == dash.start_s == dash.end_s <= b.start_s


def test_durations_must_match_the_phonemes() -> None:
    with pytest.raises(ValueError):
        time_words(PieceWords(("a",), (0,)), "a", [1, 2])


@given(
    st.lists(st.floats(0, 5), min_size=1, max_size=20),
    st.integers(0, 24_000),
    st.integers(0, 12_000),
    st.integers(1, 240_000),
)
def test_shifted_times_stay_in_order_inside_the_audio(starts: list[float], head: int, pause: int, length: int) -> None:
    ordered = sorted(starts)
    words = [TimedWord(word=str(i), start_s=s, end_s=s + 0.1) for i, s in enumerate(ordered)]
    shifted = shift_words(words, head, pause, length + pause)
    assert [w.start_s for w in shifted] == sorted(w.start_s for w in shifted)
    assert all(pause / 24_000 <= w.start_s <= w.end_s <= (length + pause) / 24_000 for w in shifted)


def test_shift_moves_by_the_pause_less_the_trimmed_head() -> None:
    (word,) = shift_words([TimedWord(word="x", start_s=1.0, end_s=1.5)], 12_000, 2_400, 10 * 24_000)
    assert (word.start_s, word.end_s) == pytest.approx((0.6, 1.1))
    (later,) = offset_words([word], 2.0)
    assert (later.start_s, later.end_s) == pytest.approx((2.6, 3.1))
