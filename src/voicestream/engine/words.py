"""Which written word each phoneme of a piece speaks, worked out when a request is planned.

A word is what the user wrote between spaces ("Dr.", "$5"), or, in Japanese and Chinese,
a word as that language's segmenter cuts it (OpenJTalk's, which misaki's Japanese G2P
reads; jieba's, which its Chinese G2P uses). Only requests that ask for word timestamps
pay for this: one more G2P pass over the sentence's words, said alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from voicestream.engine.alignment import NO_WORD, PieceWords, label_phonemes
from voicestream.engine.phonemes import Phonemizer
from voicestream.text.spans import UNSPACED_LANGUAGES, Span, TracedText, token_spans


@dataclass(frozen=True)
class SentenceWordPlan:
    """A sentence's written words, their offsets in the text as sent, and per symbol of
    its phonemes, the word's index."""

    texts: tuple[str, ...]
    spans: tuple[Span, ...]
    labels: tuple[int, ...]

    def for_batch(self, phonemes: str, batch: str, cursor: int) -> tuple[PieceWords, int]:
        """The words of ``batch``, a run of the sentence's ``phonemes`` from ``cursor`` on
        (cut at spaces and stripped, perhaps with spaces added where an unbroken run was
        sliced), and the cursor after it."""
        labels = []
        for symbol in batch:
            while cursor < len(phonemes) and phonemes[cursor] != symbol and phonemes[cursor] == " ":
                cursor += 1
            if cursor < len(phonemes) and phonemes[cursor] == symbol:
                labels.append(self.labels[cursor])
                cursor += 1
            else:
                labels.append(NO_WORD)
        present = sorted({label for label in labels if label != NO_WORD})
        local = {label: index for index, label in enumerate(present)}
        return PieceWords(
            texts=tuple(self.texts[label] for label in present),
            labels=tuple(local.get(label, NO_WORD) for label in labels),
            spans=tuple(self.spans[label] for label in present),
        ), cursor


@dataclass(frozen=True)
class _Token:
    text: str
    runs: list[Span]
    """The runs of the source its characters come from (`TracedText.pieces`)."""


class WordPlanner:
    """Maps a request's normalized sentences back to the text the user sent, sentence by
    sentence, through the normalizer's trace (`TracedText`)."""

    def __init__(self, phonemizer: Phonemizer, source: str, spoken: TracedText, sentences: Sequence[str], language: str) -> None:
        self._phonemizer = phonemizer
        self._source = source
        self._language = language
        self._sentences = list(sentences)
        self._tokens: list[list[_Token]] = []
        cursor = 0
        for sentence in self._sentences:
            tokens, cursor = _located_tokens(spoken, sentence, language, cursor)
            self._tokens.append(tokens)

    def sentence(self, index: int, phonemes: str, tokens: slice = slice(None)) -> SentenceWordPlan:
        """The words of sentence ``index`` (its tokens ``tokens``, all by default), phonemized as ``phonemes``."""
        units = _units(self._sentences[index], self._tokens[index], tokens, self._language)
        spoken = self._phonemizer.phonemize_words([text for text, _ in units], self._language)
        labels = label_phonemes(phonemes, spoken)
        written = tuple("".join(self._source[a:b] for a, b in runs) for _, runs in units)
        spans = tuple((min(a for a, _ in runs), max(b for _, b in runs)) for _, runs in units)
        return SentenceWordPlan(written, spans, tuple(labels))


def _located_tokens(spoken: TracedText, sentence: str, language: str, cursor: int) -> tuple[list[_Token], int]:
    """The sentence's tokens with their source runs, and where in ``spoken`` the next
    sentence starts: the chunker keeps every character but whitespace, in order, so each
    character of the sentence is the next one of ``spoken`` that is not whitespace."""
    positions: list[int] = []
    text = spoken.text
    for char in sentence:
        if char.isspace():
            positions.append(-1)
            continue
        while cursor < len(text) - 1 and text[cursor].isspace():
            cursor += 1
        positions.append(min(cursor, len(text) - 1))
        cursor += 1
    tokens = []
    for start, end in token_spans(sentence, language):
        first, last = positions[start], positions[end - 1]
        tokens.append(_Token(sentence[start:end], spoken.pieces(first, last + 1)))
    return tokens, cursor


def _units(sentence: str, tokens: list[_Token], chosen: slice, language: str) -> list[tuple[str, list[Span]]]:
    """The chosen tokens grouped into what is timed as one word: the text to phonemize and
    its source runs. Neighbours written as one source word ("5 dollars" from "$5") are one unit."""
    indices = list(range(len(tokens)))[chosen]
    if language in UNSPACED_LANGUAGES:
        chosen_set = set(indices)
        groups = [[i for i in group if i in chosen_set] for group in _segments(sentence, language)]
        pieces = [group for group in groups if group]
    else:
        pieces = [[i] for i in indices]
    separator = "" if language in UNSPACED_LANGUAGES else " "
    units: list[tuple[str, list[Span]]] = []
    for members in pieces:
        text = "".join(tokens[i].text for i in members)
        runs = [run for i in members for run in tokens[i].runs]
        if units and min(a for a, _ in runs) < max(b for _, b in units[-1][1]):  # one written word
            previous_text, previous_runs = units[-1]
            units[-1] = (previous_text + separator + text, _merged([*previous_runs, *runs]))
        else:
            units.append((text, _merged(runs)))
    return [(text, runs) for text, runs in units if any(ch.isalnum() for ch in text)] or units


def _merged(runs: list[Span]) -> list[Span]:
    """Runs in source order, overlapping or touching ones merged."""
    merged: list[list[int]] = []
    for a, b in sorted(runs):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def _segments(sentence: str, language: str) -> list[list[int]]:
    """Groups of character tokens that the language's segmenter calls one word."""
    tokens = token_spans(sentence, language)
    if language == "zh":
        import jieba

        words = list(jieba.cut(sentence))
    else:
        import pyopenjtalk

        words = [word["string"] for word in pyopenjtalk.run_frontend(sentence)]
    groups: list[list[int]] = []
    position = {start: i for i, (start, _) in enumerate(tokens)}
    cursor = 0
    for word in words:
        found = sentence.find(word, cursor) if word.strip() else -1
        start, cursor = (found, found + len(word)) if found >= 0 else (cursor, cursor + len(word))
        members = [position[i] for i in range(start, min(cursor, len(sentence))) if i in position]
        if members:
            groups.append(members)
    covered = {i for group in groups for i in group}
    return sorted(groups + [[i] for i in range(len(tokens)) if i not in covered], key=lambda group: group[0])
