"""How long each chunk of one spoken answer is: short first, then whole sentences.

The first chunk decides when the listener hears anything, so in latency mode it ends at the
first good break after a few words; every later chunk is synthesized while earlier audio
plays, so it can be whole sentences (whole-sentence prosody) and may group several.
"""

from __future__ import annotations

from dataclasses import dataclass

# fmt: off
BREAK_WORDS = frozenset({
    # conjunctions
    "and", "but", "or", "nor", "so", "yet", "because", "although", "though", "while",
    "whereas", "unless", "until", "since", "if", "when", "whenever", "once",
    # prepositions (not "of" or "to", which bind too tightly: "one of them", "want to go")
    "in", "on", "at", "by", "for", "with", "from", "into", "through", "during", "before",
    "after", "about", "over", "under", "between", "without", "within", "across", "against",
    "along", "among", "around", "behind", "beyond", "like", "near", "toward", "towards",
    "upon", "via", "as",
    # relative and question words
    "which", "who", "whom", "whose", "that", "where", "why", "how",
})
PHRASE_WORDS = frozenset({
    # articles, possessives, "of" and "to", auxiliaries: each starts a phrase, so a cut
    # before one ("a subset | of artificial intelligence") still falls between phrases,
    # where a cut after one ("a subset of | artificial intelligence") would split a phrase
    "a", "an", "the", "of", "to", "its", "their", "his", "her", "our", "your", "my",
    "is", "are", "was", "were", "be", "been", "has", "have", "had", "can", "could", "will",
    "would", "should", "may", "might", "must", "do", "does", "did",
})
# fmt: on
"""English words a first chunk may end before: a speaker could pause there. Other languages
fall back to clause marks and the word cap. `BREAK_WORDS` are good breaks as soon as the
chunk holds `first_words`; `PHRASE_WORDS` are weaker ones, taken one word later, before the
cap cuts wherever it falls."""


GROWTH = 2
"""A latency-mode piece holds at most twice the words of the chunk before it: Kokoro on two
CPU cores renders audio about twice as fast as it plays (RTF 0.45 to 0.5), so it is ready
about when the one before has played."""
CUTS_END_AFTER_WORDS = 12
"""Latency-mode cuts stop once a chunk of this many words has gone out: its 4 s or more of
audio cover the render of whatever sentence follows, so from then on every chunk ends at a
sentence end (whole-sentence prosody)."""


@dataclass(frozen=True, slots=True)
class ChunkSchedule:
    """The chunk lengths of one answer.

    `first_words` turns on latency mode: the first chunk ends at the first clause mark
    (comma, semicolon, colon, dash) or before the first break word once it holds that many
    words, before a phrase word (an article, "of", "to", an auxiliary) once it holds one
    more, and at the latest after `2 * first_words` words. Long sentences after it are cut
    the same way, each piece holding at least as many words as the chunk before it and at
    most twice as many (`GROWTH`), until a chunk of `CUTS_END_AFTER_WORDS` words has gone
    out: each piece then takes about as
    long to synthesize as the one before takes to play, so the listener hears no gap after
    the short first chunk (a 30-word sentence right after it would take longer to render
    than the first chunk and the next play).
    None: every chunk is whole sentences. `sentences` is how many sentences each chunk
    that ends a sentence holds, the last entry repeating: (1, 2) makes the first one
    sentence and every later one two.
    """

    first_words: int | None = None
    sentences: tuple[int, ...] = (1,)

    def __post_init__(self) -> None:
        if self.first_words is not None and self.first_words < 1:
            raise ValueError("first_words must be at least 1 (or None for whole sentences)")
        if not self.sentences or any(count < 1 for count in self.sentences):
            raise ValueError("sentences must be counts of at least 1, such as (1, 2)")

    def min_words(self, cut: int = 0, last: int = 0) -> int:
        """In latency mode, the fewest words a piece needs before it may end at a break:
        `first_words` for the first chunk (`cut` 0), else as many as the longest chunk
        before it (`last` words), so pieces never shrink."""
        first = self.first_words or 0
        return first if cut == 0 else max(first, last)

    def max_words(self, cut: int = 0, last: int = 0) -> int:
        """In latency mode, the word cap of a piece: `GROWTH` times its minimum, so that it
        renders in about the time the piece before it takes to play."""
        return GROWTH * self.min_words(cut, last)

    @property
    def first_max_words(self) -> int:
        """The word cap of the first chunk in latency mode."""
        return self.max_words(0)

    def ends_before(self, words: int, token: str, cut: int = 0, previous: str = "", last: int = 0) -> bool:
        """In latency mode, whether a piece holding `words` words (the piece after `cut`
        earlier cuts, the longest chunk so far `last` words, its own last word `previous`) ends
        before `token`. Below the cap a piece never ends on a phrase word ("the opening
        sentence of")."""
        low = self.min_words(cut, last)
        if self.first_words is None or words < low:
            return False
        if words >= self.max_words(cut, last):
            return True
        if previous.lower() in PHRASE_WORDS:
            return False
        word = token.lower()
        return word in BREAK_WORDS or (words > low and word in PHRASE_WORDS)

    def sentences_in(self, chunk_index: int) -> int:
        """How many sentences the chunk at `chunk_index` (0 = first) holds."""
        if chunk_index == 0:
            return 1
        return self.sentences[min(chunk_index - 1, len(self.sentences) - 1)]

    @classmethod
    def parse(cls, first_words: int | None, sentences: str) -> ChunkSchedule:
        """A schedule from settings: `first_words` 0 or None turns latency mode off;
        `sentences` is a comma-separated list such as "1,2"."""
        try:
            counts = tuple(int(part) for part in sentences.split(","))
        except ValueError:
            raise ValueError(
                f"the chunk schedule {sentences!r} must be sentence counts such as 1,2"
            ) from None
        return cls(first_words or None, counts)


SENTENCES = ChunkSchedule()
"""Every chunk one sentence: what the engine and the batch modes use."""

STREAMED = ChunkSchedule(first_words=3, sentences=(1, 2))
"""The chunks of text that streams into the server (the session's streamed utterances, the
agent's answers through them, Cartesia contexts, Wyoming streams): latency mode's short
first chunk (a break after three words, at the latest six: docs/BENCHMARKS.md measured it
against four, first audio 0.29 of sentence mode's, not 0.40, at a word error rate 0.7
points higher), then one sentence, then two at a time."""
STREAMED_SENTENCES = ChunkSchedule(sentences=STREAMED.sentences)
"""`STREAMED` without latency mode: whole sentences from the first chunk on."""
