"""The silence around speech: chosen lengths instead of whatever the model pads.

Kokoro opens every run with 270 to 380 ms of near-silence and ends it with about 500 ms.
Sent as they are, a listener hears the first sound a third of a second after the first
byte, and sentences sent as separate requests (as an agent sends them) are about 780 ms
apart, where people pause 300 to 500 ms. So every piece is cut on its audio (the first and
last audible 20 ms windows at -40 dBFS full scale, `voicestream.audio.audible`), keeping a
little of the model's own audio before the onset and after the decay, and given a fixed
silence where pieces and requests meet:

- a request starts ``leading_s`` before its first sound (enough for an unvoiced onset);
- within a request, sentences are ``sentence_s`` apart and clause cuts ``clause_s``;
- a request ends ``sentence_s - leading_s`` after its last sound, so that the next request,
  starting ``leading_s`` before its own, is ``sentence_s`` after it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voicestream.audio import first_audible_sample
from voicestream.audio.audible import AUDIBLE_WINDOW_S

TAIL_S = 0.02
"""The model's own audio kept after a piece's last audible window (the decay of its last sound)."""


@dataclass(frozen=True)
class Pauses:
    """The silences the engine puts around speech (seconds); server settings
    ``--leading-silence-ms`` and ``--sentence-pause-ms``."""

    leading_s: float = 0.02
    sentence_s: float = 0.35
    clause_s: float = 0.15

    def before(self, first: bool, ends_sentence_before: bool) -> float:
        """Silence before a piece's first sound: a request's onset, or the rest of the join's pause."""
        if first:
            return self.leading_s
        return max(0.0, (self.sentence_s if ends_sentence_before else self.clause_s) - TAIL_S)

    def after(self, last: bool) -> float:
        """Silence after a piece's last sound: the start of the pause before the next request, or the decay."""
        return max(TAIL_S, self.sentence_s - self.leading_s) if last else TAIL_S


DEFAULT_PAUSES = Pauses()


@dataclass(frozen=True)
class Trim:
    """What `fit_to_speech` did, in samples, so that times in the model's output can follow."""

    head_removed: int = 0
    head_padded: int = 0
    tail_removed: int = 0
    tail_padded: int = 0

    def shift_s(self, seconds: float, sample_rate: int) -> float:
        """Where a time of the model's output (a word's start, say) falls in the fitted audio."""
        return seconds + (self.head_padded - self.head_removed) / sample_rate


def fit_to_speech(audio: np.ndarray, sample_rate: int, before_s: float, after_s: float) -> tuple[np.ndarray, Trim]:
    """``audio`` from ``before_s`` before its first audible window to ``after_s`` after its last:
    the model's own samples where it has them, zeros where it has fewer. Audio with no audible
    window is returned whole (a quiet word is better kept than dropped)."""
    fit = SpeechFit(sample_rate, before_s, after_s)
    fitted = np.concatenate([fit.push(audio), fit.finish()])
    return (fitted, fit.trim) if fit.head is not None else (audio, Trim())


class SpeechFit:
    """`fit_to_speech` for audio that comes in parts (a piece vocoded window by window).

    Parts before the first audible window are held until it comes; after it, each part goes
    out up to its last audible window, and the quiet after that is held until more sound
    comes (it was a pause) or the audio ends (it is the tail, cut to ``after_s``). So the
    parts given out join into what `fit_to_speech` makes of the whole.

    A part pushed with ``speech_follows`` (a vocoder window with more of the piece's speech
    frames after it) goes out whole once the first sound has come: the quiet at its end is a
    pause between words, and holding it would keep audio from a listener who has nothing
    else to play (measured: 213 ms of a 525 ms window held until the next window, which took
    0.85 s, so the listener heard a gap). Only if every later part were quiet would the join
    keep more quiet than the whole fit (a pause before an inaudible last word).
    """

    def __init__(self, sample_rate: int, before_s: float, after_s: float) -> None:
        self.sample_rate = sample_rate
        self._before = round(before_s * sample_rate)
        self._after = round(after_s * sample_rate)
        self.head: Trim | None = None
        """The head's cut and padding, known once the first audible window has come."""
        self._held = np.zeros(0, np.float32)
        self._sent = np.zeros(0, np.float32)  # the end of what went out: a window's length less one
        self._tail = Trim()

    @property
    def trim(self) -> Trim:
        """What was cut and padded at both ends (complete after `finish`)."""
        head = self.head or Trim()
        return Trim(head.head_removed, head.head_padded, self._tail.tail_removed, self._tail.tail_padded)

    def push(self, part: np.ndarray, speech_follows: bool = False) -> np.ndarray:
        """The audio that can go out now, given the next part (``speech_follows``: see the
        class docstring)."""
        audio = np.concatenate([self._held, np.asarray(part, np.float32)])
        if self.head is None:
            first = first_audible_sample(audio, self.sample_rate)
            if first is None:
                self._held = audio
                return np.zeros(0, np.float32)
            start = max(0, first - self._before)
            self.head = Trim(head_removed=start, head_padded=self._before - (first - start))
            audio = np.concatenate([np.zeros(self.head.head_padded, np.float32), audio[start:]])
        if speech_follows:
            end = audio.size
        else:  # the last audible window may begin in audio already sent: look back that far
            seen = np.concatenate([self._sent, audio])
            quiet = first_audible_sample(seen[::-1], self.sample_rate)
            end = 0 if quiet is None else max(0, seen.size - quiet - self._sent.size)
        self._held = audio[end:]
        window = round(self.sample_rate * AUDIBLE_WINDOW_S)
        self._sent = np.concatenate([self._sent, audio[:end]])[-(window - 1):]
        return audio[:end]

    def finish(self) -> np.ndarray:
        """The rest: the quiet tail cut or padded to ``after_s`` (all of it, unfitted, when
        nothing was ever audible)."""
        held, self._held = self._held, np.zeros(0, np.float32)
        if self.head is None:
            return held
        kept = min(held.size, self._after)
        self._tail = Trim(tail_removed=held.size - kept, tail_padded=self._after - kept)
        return np.concatenate([held[:kept], np.zeros(self._tail.tail_padded, np.float32)])
