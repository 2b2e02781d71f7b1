"""The chunk schedule: in latency mode the first chunk of an answer ends at the first good
break after a few words; later chunks are whole sentences, possibly grouped."""

from __future__ import annotations

import pytest

from voicestream.text import SENTENCES, ChunkSchedule, IncrementalSentenceChunker
from voicestream.text.schedule import CUTS_END_AFTER_WORDS


def chunk(text: str, schedule: ChunkSchedule | int | None) -> list[str]:
    if not isinstance(schedule, ChunkSchedule):
        schedule = ChunkSchedule(first_words=schedule)
    chunker = IncrementalSentenceChunker(schedule)
    chunks = [sentence for char in text for sentence in chunker.feed(char)]
    return chunks + chunker.flush()


TEXT = "Well, I think that, after all, we should go. Then more, and more."
LONG_OPENING = (
    "A rainbow appears in the sky when sunlight shines through raindrops that bend the light "
    "into its colours. Each drop acts as a small prism. The colours always come in one order."
)


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
        "Then a long clause here,",  # the cuts are still to come: a short chunk follows
        "and more.",
    ]


def test_a_long_sentence_without_a_comma_breaks_before_a_conjunction() -> None:
    assert chunk(LONG_OPENING, 4)[:3] == [
        "A rainbow appears in the sky",
        # the rest of the first sentence is cut again, at most twice as many words later
        "when sunlight shines through raindrops that bend",
        "the light into its colours.",
    ]


def test_pieces_grow_at_most_twofold_until_a_long_chunk_has_gone_out() -> None:
    sentence = (
        "The old lighthouse keeper walked along the rocky shore every single morning "
        "before the sun rose above the grey and restless northern sea that surrounded "
        "his small island home throughout the long cold winter months of every year."
    )
    pieces = chunk(f"{sentence} {sentence} Then he slept.", 3)
    assert " ".join(pieces) == f"{sentence} {sentence} Then he slept."
    assert 3 <= len(pieces[0].split()) <= 6
    longest = 0
    for piece in pieces:
        words = len(piece.split())
        if longest >= CUTS_END_AFTER_WORDS:  # cuts are over: every chunk ends a sentence
            assert piece.endswith("."), pieces
        elif not piece.endswith("."):  # a cut: never shorter than the longest chunk before
            assert max(longest, 3) <= words <= 2 * max(longest, 3), pieces
        longest = max(longest, words)
    assert longest >= CUTS_END_AFTER_WORDS and pieces[-1] == "Then he slept."


def test_a_short_sentence_does_not_shrink_the_next_piece() -> None:
    text = (
        "A rainbow forms when the Earth's atmosphere reflects sunlight into a spectrum of "
        "colors, typically blue and red. This process occurs because the Earth is tilted at "
        "an angle relative to its orbit around the sun."
    )
    assert chunk(text, 3) == [
        "A rainbow forms",
        "when the Earth's atmosphere reflects sunlight",
        "into a spectrum of colors, typically blue",
        "and red.",
        "This process occurs because the Earth is tilted",  # 7 words at least, as the longest so far
        "at an angle relative to its orbit around the sun.",
    ]


def test_break_words_count_only_after_enough_words() -> None:
    assert chunk(LONG_OPENING, 7)[0] == "A rainbow appears in the sky when sunlight shines"


def test_a_sentence_without_any_break_is_cut_at_the_word_cap() -> None:
    text = "Seven hundred tired purple elephants quietly painted ancient wooden fences yesterday."
    assert chunk(text, 3) == [
        "Seven hundred tired purple elephants quietly",
        "painted ancient wooden fences yesterday.",
    ]


def test_the_cap_never_leaves_punctuation_alone() -> None:
    assert chunk("One two three four — five six.", 2) == ["One two three four —", "five six."]
    assert chunk("One two three four ... five six.", 2) == ["One two three four ...", "five six."]


def test_later_chunks_group_sentences_by_the_schedule() -> None:
    schedule = ChunkSchedule(first_words=4, sentences=(1, 2))
    text = LONG_OPENING + " One. Two. Three. Four."
    assert chunk(text, schedule) == [
        "A rainbow appears in the sky",
        "when sunlight shines through raindrops that bend",
        "the light into its colours.",
        "Each drop acts as a small prism.",  # the first chunk after the first sentence: 1
        "The colours always come in one order. One.",  # then 2 at a time
        "Two. Three.",
        "Four.",
    ]


def test_sentence_mode_groups_from_the_second_chunk() -> None:
    schedule = ChunkSchedule(sentences=(3,))
    assert chunk("A one. B two. C three. D four. E five.", schedule) == [
        "A one.",
        "B two. C three. D four.",
        "E five.",
    ]


def test_grouping_keeps_unspaced_scripts_unspaced() -> None:
    assert chunk("你好。我很好！你呢？", ChunkSchedule(sentences=(2,))) == ["你好。", "我很好！你呢？"]


def test_flush_returns_a_partial_group_without_an_unspeakable_tail() -> None:
    chunker = IncrementalSentenceChunker(ChunkSchedule(sentences=(3,)))
    assert chunker.feed("First one. Second one. Third one. ") == ["First one."]
    assert chunker.flush() == ["Second one. Third one."]


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
    ["It cost exactly 1,000 dollars.", "It is a well-known fact.", "Meet me tomorrow 10:30 sharp."],
)
def test_marks_inside_words_are_not_clause_ends(text: str) -> None:
    assert chunk(text, 3) == [text]


def test_reset_starts_a_new_answer_in_latency_mode() -> None:
    chunker = IncrementalSentenceChunker(ChunkSchedule(first_words=2))
    assert chunker.feed("Yes, I agree, fully. Also, ") == ["Yes, I agree,", "fully."]
    chunker.reset()
    assert chunker.feed("So then, we go") == ["So then,"]


def test_parse_reads_the_settings() -> None:
    assert ChunkSchedule.parse(0, "1") == SENTENCES
    assert ChunkSchedule.parse(5, "1,2") == ChunkSchedule(5, (1, 2))
    assert ChunkSchedule.parse(5, "1,2").first_max_words == 10


@pytest.mark.parametrize(("first_words", "sentences"), [(0, "1"), (-1, "1"), (3, "0"), (3, "a,b"), (3, "")])
def test_rejects_bad_settings(first_words: int, sentences: str) -> None:
    with pytest.raises(ValueError):
        if first_words == 0:
            ChunkSchedule(first_words=0)
        else:
            ChunkSchedule.parse(first_words, sentences)


def test_one_word_after_enough_words_a_phrase_word_is_a_break_too() -> None:
    assert chunk("Machine learning is a subset of artificial intelligence that learns.", 4)[0] == (
        "Machine learning is a subset"
    )
    assert chunk("The internet is a vast network of interconnected computers.", 4)[0] == (
        "The internet is a vast network"
    )


def test_a_piece_never_ends_on_a_phrase_word_below_the_cap() -> None:
    assert chunk("When the opening sentence of a spoken answer is long, we wait.", 4)[0] == (
        "When the opening sentence of a spoken answer"
    )


def test_a_phrase_word_right_at_the_minimum_is_not_a_break() -> None:
    # "a" comes after exactly four words: too early for a phrase word, so the chunk runs on
    # to the break word "in"
    assert chunk("A black hole is a region in space where gravity wins.", 4)[0] == "A black hole is a region"
