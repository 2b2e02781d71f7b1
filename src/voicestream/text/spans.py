"""Where in the text the user sent each character of the normalized text came from.

The normalizer rewrites text for speech ("Dr." becomes "Doctor", "$5" becomes "5 dollars",
"**bold**" becomes "bold"), but word timestamps must carry the words as they were written,
with their offsets in the text as sent. So the normalizer works on a `TracedText`: every
rewrite (`TracedText.sub`) keeps, for each character it outputs, the span of the source it
stands for. A character kept as it was keeps its own span; a replacement that is a run of
the text it replaces ("bold" out of "**bold**", a link's text out of "[text](url)") keeps
that run's spans, so markers fall away; any other replacement ("5 dollars" for "$5") has,
for each of its characters, the span of the whole run it replaced, less surrounding spaces.

Tokens are words between spaces, or single characters for languages written without spaces
(Japanese, Chinese), where a rewrite is as small as one character.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

UNSPACED_LANGUAGES = frozenset({"ja", "zh"})
_WORD = re.compile(r"\S+")
_CHARACTER = re.compile(r"\S")

Span = tuple[int, int]
"""Start and end offsets (end exclusive) of a run of the source text, in code points."""

Replacement = str | Callable[[re.Match[str]], "str | TracedText"]


def token_spans(text: str, language: str) -> list[Span]:
    """The tokens of ``text`` as spans: words, or characters for unspaced languages."""
    pattern = _CHARACTER if language in UNSPACED_LANGUAGES else _WORD
    return [match.span() for match in pattern.finditer(text)]


class TracedText:
    """A text and, for each of its characters, the span of the source it came from.

    Immutable: every operation returns a new one (or this one, when nothing changed)."""

    __slots__ = ("ends", "starts", "text")

    def __init__(self, text: str, starts: list[int] | None = None, ends: list[int] | None = None) -> None:
        self.text = text
        self.starts = list(range(len(text))) if starts is None else starts
        self.ends = list(range(1, len(text) + 1)) if ends is None else ends

    def __len__(self) -> int:
        return len(self.text)

    def __getitem__(self, key: slice) -> TracedText:
        return TracedText(self.text[key], self.starts[key], self.ends[key])

    @classmethod
    def literal(cls, text: str, span: Span) -> TracedText:
        """``text`` written in place of the source run ``span``."""
        return cls(text, [span[0]] * len(text), [span[1]] * len(text))

    @classmethod
    def join(cls, parts: Iterable[TracedText | str], span: Span = (0, 0)) -> TracedText:
        """The parts end to end; a plain string part stands for ``span``."""
        text: list[str] = []
        starts: list[int] = []
        ends: list[int] = []
        for part in parts:
            traced = cls.literal(part, span) if isinstance(part, str) else part
            text.append(traced.text)
            starts += traced.starts
            ends += traced.ends
        return cls("".join(text), starts, ends)

    def span(self, start: int, end: int) -> Span:
        """The source run that characters ``start:end`` come from (empty at ``start``'s
        source when the range is empty)."""
        if start >= end:
            at = self.starts[start] if start < len(self.starts) else (self.ends[-1] if self.ends else 0)
            return at, at
        return min(self.starts[start:end]), max(self.ends[start:end])

    def pieces(self, start: int, end: int) -> list[Span]:
        """The source runs that characters ``start:end`` come from, in order, touching or
        overlapping runs merged: "bold." from "**bold**." is two runs, "bold" and ".".
        Characters that stand for no source (an empty span: a separator the normalizer
        wrote) count only when nothing else does."""
        chars = list(zip(self.starts[start:end], self.ends[start:end], strict=True))
        sourced = any(a < b for a, b in chars)
        runs: list[list[int]] = []
        for a, b in chars:
            if a == b and (runs or sourced):
                continue
            if runs and a <= runs[-1][1] and b >= runs[-1][0]:
                runs[-1][0] = min(runs[-1][0], a)
                runs[-1][1] = max(runs[-1][1], b)
            else:
                runs.append([a, b])
        return [(a, b) for a, b in runs]

    def sub(self, pattern: re.Pattern[str], replacement: Replacement) -> TracedText:
        """``pattern.sub(replacement, self.text)``, traced (see the module docstring). A
        callable may return a `TracedText` built from slices of ``self``, traced exactly."""
        parts: list[TracedText] = []
        last = 0
        for match in pattern.finditer(self.text):
            start, end = match.span()
            if start > last:
                parts.append(self[last:start])
            written = replacement(match) if callable(replacement) else match.expand(replacement)
            parts.append(written if isinstance(written, TracedText) else self._replaced(start, end, written))
            last = end
        if not parts:
            return self
        if last < len(self.text):
            parts.append(self[last:])
        return TracedText.join(parts)

    def map_text(self, rewrite: Callable[[TracedText], TracedText], bounds: Sequence[Span]) -> TracedText:
        """``rewrite`` applied to the text between ``bounds`` (sorted, disjoint runs of this
        text), the runs themselves kept as they are."""
        parts: list[TracedText] = []
        last = 0
        for start, end in bounds:
            parts += (rewrite(self[last:start]), self[start:end])
            last = end
        parts.append(rewrite(self[last:]))
        return TracedText.join(parts)

    def _replaced(self, start: int, end: int, written: str) -> TracedText:
        if not written:
            return TracedText("", [], [])
        found = self.text.find(written, start, end)
        if found >= 0:  # a run of what it replaces: markers dropped
            return self[found : found + len(written)]
        matched = self.text[start:end]
        inner_start = start + len(matched) - len(matched.lstrip())
        inner_end = end - (len(matched) - len(matched.rstrip()))
        if inner_start < inner_end:
            start, end = inner_start, inner_end
        return TracedText.literal(written, self.span(start, end))
