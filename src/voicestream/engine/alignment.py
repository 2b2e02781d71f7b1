"""Word timestamps from the model's token durations: token frames → phonemes → words.

Pure: no model, no G2P. The engine phonemizes a sentence once, for the audio; to know which
written word each phoneme speaks, it also phonemizes each word alone and `label_phonemes`
aligns the two (espeak-ng joins and respells words in context: "in the" is one phoneme
word, ``ɪnðə``), character by character, keeping the labels in order.

`time_words` follows hexgrad/kokoro's ``KPipeline.join_timestamps``: a frame is 600 samples
(1/40 s at 24 kHz); the start token's frames less three are the time before the first word
(without that offset, cuts land about 75 ms late); a space between two words is split
between them; the end token's frames are the silence after the last word. Punctuation is
no word's: a comma's pause lies between the words around it. Durations come from the run
at its speed, so times follow ``speed``; they are seconds, so resampling leaves them alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from difflib import SequenceMatcher

from voicestream.engine.graph import FRAME_SAMPLES

SAMPLE_RATE = 24_000
FRAME_S = FRAME_SAMPLES / SAMPLE_RATE
START_OFFSET_FRAMES = 3
"""hexgrad/kokoro's offset: the first word starts this many frames before the start token ends."""
NO_WORD = -1
NON_SOUNDS = frozenset(' !"(),.:;?—“”…¡¿«»-')
"""Kokoro vocabulary symbols that are not sounds of a word: spaces and punctuation."""
_STRESS = frozenset("ˈˌ")


@dataclass(frozen=True, slots=True)
class TimedWord:
    """One written word (as the user sent it, before normalization, markup markers left out)
    and when it is spoken, in seconds from the start of some audio (a piece's, then its
    request's); ``start_char`` and ``end_char`` are its offsets in the text as sent, in code
    points, end exclusive, when known. The server hands it to the faces, which write it in
    their own wire form (the protocol's `WordTiming` has the same fields)."""

    word: str
    start_s: float
    end_s: float
    start_char: int | None = None
    end_char: int | None = None


@dataclass(frozen=True)
class PieceWords:
    """The written words a piece speaks, and for each phoneme of the piece the index of its
    word in ``texts`` (`NO_WORD` for spaces and punctuation)."""

    texts: tuple[str, ...]
    labels: tuple[int, ...]
    spans: tuple[tuple[int, int], ...] = ()
    """Each word's offsets in the text as sent (start, end exclusive), when known."""


def label_phonemes(phonemes: str, word_phonemes: Sequence[str]) -> list[int]:
    """For each symbol of ``phonemes`` (a sentence phonemized in context), the index of the
    word of ``word_phonemes`` (each word phonemized alone) it belongs to, or `NO_WORD`.

    Symbols are matched with `difflib` ignoring stress marks; a symbol with no match takes
    its neighbour's word, and labels never go back, so each word is one run of symbols."""
    reference: list[str] = []
    owners: list[int] = []
    for index, word in enumerate(word_phonemes):
        for symbol in word:
            if symbol not in NON_SOUNDS and symbol not in _STRESS:
                reference.append(symbol)
                owners.append(index)
    positions = [i for i, symbol in enumerate(phonemes) if symbol not in NON_SOUNDS and symbol not in _STRESS]
    labels = [NO_WORD] * len(phonemes)
    if not reference or not positions:
        return labels
    sounds = [phonemes[i] for i in positions]
    found: list[int | None] = [None] * len(sounds)
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, reference, sounds, autojunk=False).get_opcodes():
        if tag in ("equal", "replace"):
            for k in range(j1, j2):
                found[k] = owners[i1 + (k - j1) * (i2 - i1) // (j2 - j1)]
    owner = next((label for label in found if label is not None), 0)
    for k, position in enumerate(positions):
        owner = max(owner, found[k]) if found[k] is not None else owner
        labels[position] = owner
    _stress_marks_join_their_word(phonemes, labels)
    return labels


def _stress_marks_join_their_word(phonemes: str, labels: list[int]) -> None:
    """A stress mark belongs to the sound after it (the word it stresses)."""
    for i in range(len(phonemes) - 1, -1, -1):
        if phonemes[i] in _STRESS:
            labels[i] = labels[i + 1] if i + 1 < len(phonemes) else labels[i - 1] if i else NO_WORD


def time_words(words: PieceWords, phonemes: str, durations: Sequence[int]) -> list[TimedWord]:
    """Each word of ``words`` with its start and end in seconds from the start of the run's
    audio; ``durations`` are the run's frames per token: start token, one per symbol of
    ``phonemes``, end token. A word with no symbols gets an empty span where it falls."""
    frames = [int(d) for d in durations]
    if len(frames) != len(phonemes) + 2:
        raise ValueError(f"{len(frames)} durations for {len(phonemes)} phonemes and two boundary tokens")
    starts = [frames[0]]
    for frame in frames[1:-1]:
        starts.append(starts[-1] + frame)
    offset = min(START_OFFSET_FRAMES, frames[0])
    bounds: dict[int, list[float]] = {}
    for i, label in enumerate(words.labels):
        if label == NO_WORD:
            continue
        start, end = float(starts[i]), float(starts[i + 1])
        if i > 0 and phonemes[i - 1] == " ":
            start -= frames[i] / 2  # frames[i] is the space's: symbol i-1 is token i
        if i + 1 < len(phonemes) and phonemes[i + 1] == " ":
            end += frames[i + 2] / 2
        span = bounds.setdefault(label, [start, end])
        span[1] = end
    timings = []
    cursor = max(0.0, starts[0] - offset)
    for index, text in enumerate(words.texts):
        start, end = bounds.get(index, (cursor + offset, cursor + offset))
        start, end = max(0.0, start - offset), max(0.0, end - offset)
        start = max(start, cursor)
        end = max(end, start)
        chars = words.spans[index] if index < len(words.spans) else (None, None)
        timings.append(TimedWord(text, start * FRAME_S, end * FRAME_S, chars[0], chars[1]))
        cursor = end
    return timings


def shift_words(
    words: Sequence[TimedWord], head_removed: int, pause_before: int, length: int, sample_rate: int = SAMPLE_RATE
) -> list[TimedWord]:
    """Word times of a run's audio made relative to the audio the engine returns: the run
    lost ``head_removed`` samples at its head (silence trimming), then got ``pause_before``
    samples of silence in front, and is ``length`` samples long in the end. Every change to
    trimming or pauses goes through here, so times stay exact whatever is trimmed."""
    shift = (pause_before - head_removed) / sample_rate
    floor, ceiling = pause_before / sample_rate, length / sample_rate
    return [
        replace(w, start_s=min(max(w.start_s + shift, floor), ceiling), end_s=min(max(w.end_s + shift, floor), ceiling))
        for w in words
    ]


def offset_words(words: Sequence[TimedWord], seconds: float) -> list[TimedWord]:
    """Word times of one piece made relative to a request's audio that starts ``seconds`` earlier."""
    return [replace(w, start_s=w.start_s + seconds, end_s=w.end_s + seconds) for w in words]


def offset_chars(words: Sequence[TimedWord], chars: int) -> list[TimedWord]:
    """Word offsets of one part of a text made relative to the whole, which holds ``chars``
    characters before that part (a streamed utterance's chunk, an answer's sentence)."""
    if not chars:
        return list(words)
    return [
        replace(w, start_char=w.start_char + chars, end_char=w.end_char + chars)
        if w.start_char is not None and w.end_char is not None else w
        for w in words
    ]
