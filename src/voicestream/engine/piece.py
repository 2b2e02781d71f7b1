"""A unit of synthesis, as `KokoroEngine.plan` cuts a text (`voicestream.engine.kokoro`)."""

from __future__ import annotations

from dataclasses import dataclass

from voicestream.engine.alignment import PieceWords


@dataclass(frozen=True)
class Piece:
    """One unit of synthesis: at most 510 phonemes, rendered by a single model run (or, when
    `windowed`, one run of the model's front and its vocoder in windows).

    ``first`` and ``last`` say where the piece sits in its request; the model's padding is
    cut to ``silence_before_s`` before its first sound and ``silence_after_s`` after its
    last (`voicestream.engine.silence`).
    """

    text: str
    phonemes: str
    first: bool
    last: bool
    silence_before_s: float = 0.0
    silence_after_s: float = 0.0
    ends_sentence: bool = True
    words: PieceWords | None = None
    windowed: bool = False
    """Vocode it window by window (`voicestream.engine.vocoder`): a request's first piece
    for a listener who hears nothing yet (the plan), or one its listener would run dry
    waiting for (the server's scheduler), whose first audio should not wait for its length."""
    voice: str | None = None
    """The voice that reads it, where its markup names one (SSML ``<voice>``); None: the request's."""
    speed: float = 1.0
    """Its markup's multiplier of the request's speed (SSML ``<prosody rate>``)."""
