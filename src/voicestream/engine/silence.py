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
    first = first_audible_sample(audio, sample_rate)
    if first is None:
        return audio, Trim()
    end = audio.size - first_audible_sample(audio[::-1], sample_rate)  # type: ignore[operator]
    before, after = round(before_s * sample_rate), round(after_s * sample_rate)
    start, stop = max(0, first - before), min(audio.size, end + after)
    trim = Trim(start, before - (first - start), audio.size - stop, after - (stop - end))
    return np.concatenate([
        np.zeros(trim.head_padded, np.float32), audio[start:stop], np.zeros(trim.tail_padded, np.float32),
    ]), trim
