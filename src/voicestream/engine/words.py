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
from voicestream.text.spans import UNSPACED_LANGUAGES, Span, source_spans, token_spans


@dataclass(frozen=True)
class SentenceWords:
    """A sentence's written words and, per symbol of its phonemes, the word's index."""

    texts: tuple[str, ...]
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
        ), cursor


class WordPlanner:
    """Maps a request's normalized sentences back to the text the user sent, sentence by sentence."""

    def __init__(self, phonemizer: Phonemizer, source: str, sentences: Sequence[str], language: str) -> None:
        self._phonemizer = phonemizer
        self._source = source
        self._language = language
        tokens = [[sentence[a:b] for a, b in token_spans(sentence, language)] for sentence in sentences]
        spans = iter(source_spans(source, [t for sentence in tokens for t in sentence], language))
        self._spans = [[next(spans) for _ in sentence] for sentence in tokens]

    def sentence(self, index: int, sentence: str, phonemes: str) -> SentenceWords:
        """The words of sentence ``index`` (its text ``sentence``, phonemized as ``phonemes``)."""
        units = _units(sentence, self._spans[index], self._language)
        spoken = self._phonemizer.phonemize_words([text for text, _ in units], self._language)
        labels = label_phonemes(phonemes, spoken)
        return SentenceWords(tuple(self._source[a:b] for _, (a, b) in units), tuple(labels))


def _units(sentence: str, spans: list[Span], language: str) -> list[tuple[str, Span]]:
    """The sentence cut into what is timed as one word: the text to phonemize and its source span.
    Neighbours written as one source word ("5 dollars" from "$5") are one unit."""
    tokens = token_spans(sentence, language)
    pieces = _segments(sentence, tokens, language) if language in UNSPACED_LANGUAGES else [[i] for i in range(len(tokens))]
    units: list[tuple[str, Span]] = []
    for members in pieces:
        text = "".join(sentence[tokens[i][0] : tokens[i][1]] for i in members)
        span = (min(spans[i][0] for i in members), max(spans[i][1] for i in members))
        if units and units[-1][1][1] > span[0]:  # overlapping source runs: one written word
            previous_text, previous_span = units[-1]
            separator = "" if language in UNSPACED_LANGUAGES else " "
            units[-1] = (previous_text + separator + text, (previous_span[0], max(previous_span[1], span[1])))
        else:
            units.append((text, span))
    return [(text, span) for text, span in units if any(ch.isalnum() for ch in text)] or units


def _segments(sentence: str, tokens: list[Span], language: str) -> list[list[int]]:
    """Groups of character tokens that the language's segmenter calls one word."""
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
