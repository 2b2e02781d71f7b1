"""Properties of the chunker on generated text: fragmentation never changes the chunks,
no text is lost or reordered, and no chunk is only whitespace or punctuation."""

from __future__ import annotations

import itertools

from hypothesis import example, given, settings
from hypothesis import strategies as st

from voicestream.text import ChunkSchedule, IncrementalSentenceChunker
from voicestream.text.chunker import UNSPACED_CLAUSE_MARKS, UNSPACED_TERMINATORS

# fmt: off
TRICKY_TOKENS = [
    "Hello", "world", "The", "How", "it", "is", "Smith", "I", "a", "Tomorrow",
    "Dr.", "Mr.", "Mrs.", "Prof.", "St.", "Jr.", "Co.", "Inc.", "No.", "p.", "Fig.", "Jan.",
    "U.S.", "E.U.", "U.S.A.", "Ph.D.", "e.g.", "i.e.", "etc.", "vs.", "a.m.", "p.m.", "J.",
    "3.14", "$3.50", "50%", "10:30", "1,000", "v1.2.3", "192.168.0.1", "Python 3.12",
    "jane.doe@example.com", "https://example.com/a.b?c=d", "example.com", "report.pdf",
    "1.", "2.", "10.", "a.", "b.", "1)", "2.)", "•", "⁃3.", "-", "*", "**", "#",
    ".", "..", "...", "…", ". . .", "!", "?", "?!", "!!", ",", ";", ":", "—", "[...]",
    '"', "'", "(", ")", "“", "”", "f(x)", "🎉",
    "你好。", "我很好！", "你呢？", "。", "「", "」", "３．５", "यह है।", "॥", "؟", "Привет.",
]
SEPARATORS = [" ", " ", " ", "", "  ", "\n", "\n\n", " \n", "\t"]
# fmt: on

tricky_texts = st.lists(
    st.tuples(st.sampled_from(TRICKY_TOKENS), st.sampled_from(SEPARATORS)), max_size=40
).map(lambda parts: "".join(token + separator for token, separator in parts))

any_texts = st.text(max_size=120)

schedules = st.builds(
    ChunkSchedule,
    first_words=st.none() | st.integers(1, 6),
    sentences=st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple),
)


def chunk(fragments: list[str], schedule: ChunkSchedule | None = None) -> list[str]:
    chunker = IncrementalSentenceChunker(schedule or ChunkSchedule())
    chunks = [sentence for fragment in fragments for sentence in chunker.feed(fragment)]
    return chunks + chunker.flush()


@st.composite
def fragmented(draw: st.DrawFn, texts: st.SearchStrategy[str]) -> tuple[str, list[str]]:
    text = draw(texts)
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=len(text))))
    bounds = [0, *cuts, len(text)]
    return text, [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def without_whitespace(text: str) -> str:
    return "".join(text.split())


def collapsed(text: str) -> str:
    return " ".join(text.split())


def is_speakable(text: str) -> bool:
    return any(c.isalnum() for c in text)


def check_invariants(text: str, chunks: list[str]) -> None:
    """The chunks are the text in order, less an unspeakable tail that `flush` dropped;
    whitespace aside in general, exactly with whitespace collapsed where every boundary
    falls on whitespace (no unspaced sentence or clause marks)."""
    for sentence in chunks:
        assert is_speakable(sentence), sentence
        assert sentence == collapsed(sentence)
    joined, full = without_whitespace("".join(chunks)), without_whitespace(text)
    assert full.startswith(joined)
    assert not is_speakable(full[len(joined) :])
    if not any(c in UNSPACED_TERMINATORS or c in UNSPACED_CLAUSE_MARKS for c in text):
        joined, full = " ".join(chunks), collapsed(text)
        assert full.startswith(joined)
        assert not is_speakable(full[len(joined) :])


SETTINGS = settings(max_examples=200, deadline=None)


@SETTINGS
@given(fragmented(tricky_texts))
def test_fragmentation_never_changes_the_chunks(case: tuple[str, list[str]]) -> None:
    text, fragments = case
    assert chunk(fragments) == chunk([text]) == chunk(list(text))


@SETTINGS
@given(fragmented(any_texts))
def test_fragmentation_never_changes_the_chunks_of_any_text(case: tuple[str, list[str]]) -> None:
    text, fragments = case
    assert chunk(fragments) == chunk([text])


@SETTINGS
@given(fragmented(tricky_texts), schedules)
def test_every_schedule_is_fragmentation_invariant(
    case: tuple[str, list[str]], schedule: ChunkSchedule
) -> None:
    text, fragments = case
    assert chunk(fragments, schedule) == chunk([text], schedule) == chunk(list(text), schedule)


@SETTINGS
@given(tricky_texts, schedules)
def test_no_text_is_lost_and_no_chunk_is_unspeakable(text: str, schedule: ChunkSchedule) -> None:
    check_invariants(text, chunk(list(text), schedule))


@SETTINGS
@given(tricky_texts, st.integers(1, 6))
@example("Hello 你好。Hello", 1)  # the last word ended the token the word cap waited on
def test_latency_mode_only_shortens_the_first_chunk(text: str, first_words: int) -> None:
    """Latency mode cuts the first sentence at most once, never after the word cap."""
    whole = chunk([text])
    fast = chunk([text], ChunkSchedule(first_words=first_words))
    assert without_whitespace("".join(fast)) == without_whitespace("".join(whole))
    if fast and fast[0] != whole[0]:
        assert whole[0].startswith(fast[0])
        assert sum(is_speakable(token) for token in fast[0].split()) <= 2 * first_words


@SETTINGS
@given(any_texts)
def test_no_text_is_lost_from_any_text(text: str) -> None:
    check_invariants(text, chunk([text]))


@given(fragmented(tricky_texts | any_texts), schedules, st.integers(0, 3))
@settings(max_examples=150)
def test_chunks_know_where_they_lie_in_the_text_fed(
    case: tuple[str, list[str]], schedule: ChunkSchedule, flush_after: int
) -> None:
    """Each chunk is `fed[start:end]`, whitespace collapsed, across flushes too (a stream's
    delay speaks what waits, and the text goes on): word offsets rest on this."""
    text, fragments = case
    chunker = IncrementalSentenceChunker(schedule)
    located = []
    for index, fragment in enumerate(fragments):
        located += chunker.feed_chunks(fragment)
        if index == flush_after:
            located += chunker.flush_chunks()
    located += chunker.flush_chunks()
    for found in located:
        assert found.raw == text[found.start : found.end]
        assert found.text == " ".join(found.raw.split())
    assert [found.start for found in located] == sorted(found.start for found in located)
