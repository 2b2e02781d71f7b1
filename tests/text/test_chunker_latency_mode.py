"""The optional latency mode: the first chunk of an answer may end at a clause mark."""

from __future__ import annotations

import pytest

from voicestream.text import IncrementalSentenceChunker


def chunk(text: str, min_clause_words: int | None) -> list[str]:
    chunker = IncrementalSentenceChunker(min_clause_words=min_clause_words)
    chunks = [sentence for char in text for sentence in chunker.feed(char)]
    rest = chunker.flush()
    return chunks if rest is None else [*chunks, rest]


TEXT = "Well, I think that, after all, we should go. Then more, and more."


def test_off_by_default() -> None:
    assert chunk(TEXT, None) == [
        "Well, I think that, after all, we should go.",
        "Then more, and more.",
    ]


def test_first_chunk_ends_at_a_clause_mark_once_it_has_enough_words() -> None:
    assert chunk(TEXT, 3) == [
        "Well, I think that,",
        "after all, we should go.",
        "Then more, and more.",
    ]


def test_a_sentence_that_ends_first_is_the_first_chunk() -> None:
    assert chunk("Hi. Then a long clause here, and more.", 3) == [
        "Hi.",
        "Then a long clause here, and more.",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "This is the answer — it is long. Next.",
            ["This is the answer —", "it is long.", "Next."],
        ),
        ("This is the answer - it is long.", ["This is the answer -", "it is long."]),
        ("Here are three things: one, two.", ["Here are three things:", "one, two."]),
        ("First we wait; then we go.", ["First we wait;", "then we go."]),
        ("我们今天去公园，然后回家。", ["我们今天去公园，", "然后回家。"]),
    ],
)
def test_clause_marks(text: str, expected: list[str]) -> None:
    assert chunk(text, 1 if "我" in text else 3) == expected


@pytest.mark.parametrize(
    "text",
    ["It cost 1,000 dollars in all.", "It is a well-known fact here.", "Meet at 10:30 on the dot."],
)
def test_marks_inside_words_are_not_clause_ends(text: str) -> None:
    assert chunk(text, 1) == [text]


def test_reset_starts_a_new_answer_in_latency_mode() -> None:
    chunker = IncrementalSentenceChunker(min_clause_words=2)
    assert chunker.feed("Yes, I agree, fully. Also, ") == ["Yes, I agree,", "fully."]
    chunker.reset()
    assert chunker.feed("So then, we go") == ["So then,"]


def test_rejects_a_minimum_below_one() -> None:
    with pytest.raises(ValueError):
        IncrementalSentenceChunker(min_clause_words=0)
