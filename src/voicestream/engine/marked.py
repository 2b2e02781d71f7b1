"""The pieces of a text with markup (`voicestream.text.markup`): SSML, inline phonemes, lexicon words.

Text spans are normalized, cut into sentences and phonemized as plain text is; a word with
fixed phonemes joins its sentence with those phonemes as they are; a pause ends the piece
before it and opens the next with that much silence (the model's audio is cut at its first
and last sound, so the silence between the two sounds is the pause). At a request's end or
start a break counts the pause between requests in (`Pauses.after` and the next request's
leading silence), so that a streamed text cut into requests beside a break has the same
silence there as the whole text would have; a sentence or paragraph
end is the engine's own sentence pause (twice it for a paragraph). A span read in another
voice, speed or language is a piece of its own that carries that voice and speed
(`Piece.voice`, `Piece.speed`). Word times keep the writer's words: each word, fixed or not,
knows its offsets in the text as sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from voicestream.engine.alignment import NO_WORD, NON_SOUNDS
from voicestream.engine.phonemes import Phonemizer, split_first_clause, split_phonemes
from voicestream.engine.piece import Piece
from voicestream.engine.silence import TAIL_S, Pauses
from voicestream.engine.words import SentenceWordPlan, WordPlanner
from voicestream.text import IncrementalSentenceChunker
from voicestream.text.markup import (
    Boundary,
    Markup,
    Pause,
    Pronounced,
    Said,
    Voicing,
    ends_sentence,
)
from voicestream.text.normalize import normalize_traced
from voicestream.text.spans import TracedText


@dataclass
class _Sentence:
    """One sentence's phonemes, part by part, read in one voicing, and the silence before it."""

    voicing: Voicing
    pause_before_s: float | None
    """An explicit pause before it (None: the engine's sentence pause)."""
    paragraph_before: bool = False
    texts: list[str] = field(default_factory=list)
    phonemes: list[str] = field(default_factory=list)
    plans: list[SentenceWordPlan] = field(default_factory=list)

    def add(self, text: str, phonemes: str, plan: SentenceWordPlan | None) -> None:
        if not phonemes:
            return
        self.texts.append(text)
        self.phonemes.append(phonemes)
        if plan is not None:
            self.plans.append(plan)

    @property
    def joined(self) -> str:
        return " ".join(self.phonemes)

    def word_plan(self) -> SentenceWordPlan:
        """The parts' word plans as one: each part's words after the last's, a space between."""
        texts: list[str] = []
        spans: list[tuple[int, int]] = []
        labels: list[int] = []
        for plan in self.plans:
            if labels:
                labels.append(NO_WORD)
            labels += [NO_WORD if label == NO_WORD else label + len(texts) for label in plan.labels]
            texts += plan.texts
            spans += plan.spans
        return SentenceWordPlan(tuple(texts), tuple(spans), tuple(labels))


def _sentences_of(spoken: TracedText) -> list[tuple[str, TracedText]]:
    """The sentences of a normalized text, each with its slice of the trace: the chunker keeps
    every character but whitespace, in order."""
    chunker = IncrementalSentenceChunker()
    sentences = [*chunker.feed(spoken.text), *chunker.flush()]
    located = []
    cursor = 0
    text = spoken.text
    for sentence in sentences:
        first = last = None
        for char in sentence:
            if char.isspace():
                continue
            while cursor < len(text) and text[cursor] != char:
                cursor += 1
            first = cursor if first is None else first
            last = cursor
            cursor += 1
        if first is not None and last is not None:
            located.append((sentence, spoken[first : last + 1]))
    return located


class MarkedPlanner:
    """`KokoroEngine.plan` for a text with markup."""

    def __init__(self, phonemizer: Phonemizer, pauses: Pauses, can_window: bool) -> None:
        self._phonemizer = phonemizer
        self._pauses = pauses
        self._can_window = can_window

    def sentences(self, source: str, markup: Markup, words: bool) -> tuple[list[_Sentence], float]:
        """The sentences in reading order, and the explicit pause after the last."""
        sentences: list[_Sentence] = []
        current: _Sentence | None = None
        pause: float | None = None
        paragraph = False

        def sentence_for(voicing: Voicing) -> _Sentence:
            nonlocal current, pause, paragraph
            if current is None or current.voicing != voicing:
                current = _Sentence(voicing, pause, paragraph)
                sentences.append(current)
                pause, paragraph = None, False
            return current

        for item in markup.items:
            if isinstance(item, Pause):
                current = None
                pause = (pause or 0.0) + item.seconds
            elif isinstance(item, Boundary):
                current = None
                paragraph = paragraph or item.paragraph
            elif isinstance(item, Pronounced):
                plan = None
                if words:
                    labels = tuple(NO_WORD if symbol in NON_SOUNDS else 0 for symbol in item.phonemes)
                    plan = SentenceWordPlan((item.word,), (item.span,), labels)
                sentence_for(item.voicing).add(item.word, item.phonemes, plan)
            elif isinstance(item, Said):
                language = item.voicing.language
                located = _sentences_of(normalize_traced(item.text, language))
                for index, (text, traced) in enumerate(located):
                    phonemes = self._phonemizer.phonemize(text, language)
                    plan = WordPlanner(self._phonemizer, source, traced, [text], language).sentence(0, phonemes) if words and phonemes else None
                    sentence_for(item.voicing).add(text, phonemes, plan)
                    if index < len(located) - 1 or ends_sentence(text):
                        current = None
        spoken = []
        carried: float | None = None
        for sentence in sentences:  # a sentence with nothing to say passes its pause on
            if not sentence.phonemes:
                if sentence.pause_before_s is not None:
                    carried = (carried or 0.0) + sentence.pause_before_s
                continue
            if carried is not None:
                sentence.pause_before_s = (sentence.pause_before_s or 0.0) + carried
                carried = None
            spoken.append(sentence)
        trailing = (carried or 0.0) + (pause or 0.0)
        return spoken, trailing

    def pieces(self, source: str, markup: Markup, cut_first_clause: bool, words: bool) -> Iterator[Piece]:
        sentences, trailing = self.sentences(source, markup, words)
        if not sentences:  # pauses only: one silent piece
            yield Piece(text="", phonemes="", first=True, last=True, silence_before_s=trailing)
            return
        pauses = self._pauses
        for s_index, sentence in enumerate(sentences):
            phonemes = sentence.joined
            batches = split_phonemes(phonemes)
            if cut_first_clause and s_index == 0 and batches:
                batches = [*split_first_clause(batches[0]), *batches[1:]]
            plan = sentence.word_plan() if words else None
            cursor = 0
            for b_index, batch in enumerate(batches):
                piece_words = None
                if plan is not None:
                    piece_words, cursor = plan.for_batch(phonemes, batch, cursor)
                first = s_index == 0 and b_index == 0
                last = s_index == len(sentences) - 1 and b_index == len(batches) - 1
                before = pauses.before(first, ends_sentence_before=b_index == 0)
                if b_index == 0 and sentence.pause_before_s is not None:
                    pause = sentence.pause_before_s
                    # a request's first: the previous request ended with the sentence pause
                    # (`Pauses.after`), which the break includes; else the previous piece keeps
                    # TAIL_S after its sound
                    before = pauses.leading_s + max(0.0, pause - pauses.sentence_s) if first else pause - TAIL_S
                elif b_index == 0 and sentence.paragraph_before and not first:
                    before += pauses.sentence_s
                after = pauses.after(last)
                if last and trailing:  # the next request's leading silence completes the break
                    after = max(after, trailing - pauses.leading_s)
                yield Piece(
                    text=" ".join(sentence.texts),
                    phonemes=batch,
                    first=first,
                    last=last,
                    ends_sentence=b_index == len(batches) - 1,
                    silence_before_s=max(0.0, before),
                    silence_after_s=after,
                    words=piece_words,
                    windowed=cut_first_clause and first and self._can_window,
                    voice=sentence.voicing.voice,
                    speed=sentence.voicing.speed,
                )
