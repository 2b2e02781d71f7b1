"""Where in the text the user sent each spoken word came from.

The normalizer rewrites text for speech ("Dr." becomes "Doctor", "$5" becomes "5 dollars",
"**bold**" becomes "bold"), but word timestamps must carry the words as they were written.
Rather than teach every rewrite rule to keep offsets, the spoken text is compared with the
source token by token (`difflib`): tokens that came through unchanged map one to one, and a
run the normalizer rewrote maps, as a whole, to the source run it replaced. Tokens are
words between spaces, or single characters for languages written without spaces (Japanese,
Chinese), where a rewrite is as small as one character.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from difflib import SequenceMatcher

UNSPACED_LANGUAGES = frozenset({"ja", "zh"})
_WORD = re.compile(r"\S+")
_CHARACTER = re.compile(r"\S")

Span = tuple[int, int]
"""Start and end offsets of a run of the source text."""


def token_spans(text: str, language: str) -> list[Span]:
    """The tokens of ``text`` as spans: words, or characters for unspaced languages."""
    pattern = _CHARACTER if language in UNSPACED_LANGUAGES else _WORD
    return [match.span() for match in pattern.finditer(text)]


def source_spans(source: str, spoken: Sequence[str], language: str) -> list[Span]:
    """For each token of ``spoken`` (the normalized text's tokens, in order), the span of
    ``source`` it stands for.

    A rewritten run (``replace``) keeps one-to-one spans where it has as many tokens on both
    sides, and otherwise shares the whole source run; a spoken token with no source (the
    normalizer inserted it) shares its neighbour's span, so it times with that word.
    """
    spans = token_spans(source, language)
    written = [source[start:end] for start, end in spans]
    mapped: list[Span | None] = [None] * len(spoken)
    matcher = SequenceMatcher(None, written, list(spoken), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            mapped[j1:j2] = spans[i1:i2]
        elif tag == "replace":
            mapped[j1:j2] = [(spans[i1][0], spans[i2 - 1][1])] * (j2 - j1)
    return _fill_inserted(mapped, len(source))


def _fill_inserted(mapped: list[Span | None], source_length: int) -> list[Span]:
    filled: list[Span] = []
    for span in mapped:
        filled.append(span if span is not None else filled[-1] if filled else (0, 0))
    first = next((span for span in filled if span != (0, 0)), (0, source_length))
    return [first if span == (0, 0) else span for span in filled]
