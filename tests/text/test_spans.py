"""The source spans of normalized words: what word timestamps show is what the user wrote."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from voicestream.text import normalize_for_speech
from voicestream.text.spans import source_spans, token_spans


def written(source: str, language: str = "en-us") -> list[str]:
    spoken = [normalize_for_speech(source, language)[a:b] for a, b in token_spans(normalize_for_speech(source, language), language)]
    return [source[a:b] for a, b in source_spans(source, spoken, language)]


def test_rewritten_words_keep_their_written_form() -> None:
    assert written("Dr. Smith paid $5 today.") == ["Dr.", "Smith", "paid", "$5", "$5", "today."]


def test_markup_maps_to_the_marked_up_word() -> None:
    assert written("It is **very** good & cheap") == ["It", "is", "**very**", "good", "&", "cheap"]


def test_unchanged_text_maps_one_to_one() -> None:
    text = "Plain words, nothing to rewrite here."
    assert written(text) == text.split()


def test_unspaced_languages_map_characters() -> None:
    assert written("今天很好。", "zh") == list("今天很好。")


@given(st.lists(st.sampled_from(["Dr.", "$5", "the", "**x**", "10:30", "a.m.", "3%", "e.g.", "cat,"]), min_size=1, max_size=12))
def test_spans_are_in_order_and_inside_the_source(words: list[str]) -> None:
    source = " ".join(words)
    normalized = normalize_for_speech(source)
    spoken = [normalized[a:b] for a, b in token_spans(normalized, "en-us")]
    spans = source_spans(source, spoken, "en-us")
    assert len(spans) == len(spoken)
    assert all(0 <= a < b <= len(source) for a, b in spans)
    assert [a for a, _ in spans] == sorted(a for a, _ in spans)
