"""The normalizer's trace: every spoken word knows the run of the text as sent that it
stands for, so word timestamps show what the user wrote, where they wrote it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from voicestream.text import normalize_for_speech
from voicestream.text.normalize import normalize_traced
from voicestream.text.spans import token_spans


def written(source: str, language: str = "en-us") -> list[str]:
    """Each spoken token as the source runs it comes from, joined."""
    traced = normalize_traced(source, language)
    return ["".join(source[a:b] for a, b in traced.pieces(*span)) for span in token_spans(traced.text, language)]


def test_the_trace_does_not_change_the_normalized_text() -> None:
    for text in ("It costs $5, said Dr. Lee.", "# Title\n\n- **one** & _two_\n| a | b |", "&amp; 10:30 a.m. 3.5%"):
        assert normalize_traced(text).text == normalize_for_speech(text)


def test_rewritten_words_keep_their_written_form() -> None:
    assert written("It costs $5, said Dr. Lee.") == ["It", "costs", "$5", "$5,", "said", "Dr.", "Lee."]


def test_markup_markers_fall_away() -> None:
    assert written("It is **very** good & [cheap](http://x.example)") == ["It", "is", "very", "good", "&", "cheap"]
    assert written("**bold**.") == ["bold."]


def test_table_cells_and_entities_keep_their_own_runs() -> None:
    assert written("| a | b |") == ["a", "b"]
    assert written("salt &amp; pepper") == ["salt", "&amp;", "pepper"]


def test_unspaced_languages_map_characters() -> None:
    assert written("今天很好。", "zh") == list("今天很好。")


@given(st.lists(st.sampled_from(["Dr.", "$5", "the", "**x**", "10:30", "a.m.", "3%", "e.g.", "cat,", "&amp;", "\n"]), min_size=1, max_size=12))
def test_runs_are_inside_the_source_and_in_order(words: list[str]) -> None:
    source = " ".join(words)
    traced = normalize_traced(source)
    assert traced.text == normalize_for_speech(source)
    starts = []
    for span in token_spans(traced.text, "en-us"):
        runs = traced.pieces(*span)
        assert runs and all(0 <= a <= b <= len(source) for a, b in runs)
        starts.append(runs[0][0])
    assert starts == sorted(starts)
