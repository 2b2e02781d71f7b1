"""The input audio buffer: what the client appends, at 16 kHz, and the turns found in it.

With turn detection (`server_vad` or `semantic_vad`) the buffer holds, outside a turn, only
the last `prefix_padding_ms` (the audio a turn keeps from before its start); inside one, the
whole turn, and after it the audio its detector has not heard yet (`TurnDetector.holding`).
Without VAD it holds everything appended since the last commit or clear. Either way at most
`MAX_SPOKEN_SECONDS` (the oldest audio goes first).
"""

from __future__ import annotations

import numpy as np

from voicestream.agent.realtime.codecs import ANALYSIS_RATE, InputDecoder
from voicestream.agent.realtime.end_of_turn import Verdict
from voicestream.agent.realtime.vad import (
    WINDOW,
    NoWords,
    SpeechStop,
    TurnDetector,
    TurnEvent,
)
from voicestream.agent.speech_input import MAX_SPOKEN_SECONDS
from voicestream.audio.pcm import FloatArray
from voicestream.protocol.realtime import SemanticVad, ServerVad, new_id

MAX_SAMPLES = int(MAX_SPOKEN_SECONDS * ANALYSIS_RATE)


class InputAudio:
    def __init__(
        self, format_type: str, vad: ServerVad | SemanticVad | None, start_ms: int = 0
    ) -> None:
        self.decoder = InputDecoder(format_type)
        self.vad = vad
        self.detector = None
        if isinstance(vad, SemanticVad):
            self.detector = TurnDetector(
                vad.threshold, vad.max_pause_ms, judged=True, confirm_ms=vad.confirm_ms, sure_ms=vad.sure_ms
            )
        elif vad is not None:
            self.detector = TurnDetector(vad.threshold, vad.silence_duration_ms)
        self.start_ms = start_ms
        """Where this buffer's clock starts in the session's input audio (a format or VAD
        change makes a new buffer that goes on counting)."""
        self._samples = np.zeros(0, np.float32)
        self._held_from = 0
        """The sample index (since this buffer began) of the first sample held."""
        self.total = 0
        self.item_id = new_id("item")
        """The id of the item the turn being spoken (or the next commit) becomes."""

    @property
    def ms(self) -> int:
        return self.start_ms + self.total * 1000 // ANALYSIS_RATE

    @property
    def held_ms(self) -> int:
        """The audio held that the detector has heard (all of it, unless it is holding)."""
        return self._heard * 1000 // ANALYSIS_RATE

    @property
    def holding(self) -> TurnEvent | None:
        """What the detector waits on before it hears more (`go_on`): a pause to judge, or
        the end of a turn to take; in session milliseconds."""
        held = self.detector.holding if self.detector else None
        return None if held is None else type(held)(self.start_ms + held.ms)

    @property
    def _heard(self) -> int:
        return len(self._samples) - (self.detector.unheard if self.detector else 0)

    @property
    def speaking(self) -> bool:
        return self.detector is not None and self.detector.speaking

    @property
    def speech_end_ms(self) -> int | None:
        """Where the speech heard last ended, in session milliseconds (None without VAD)."""
        return None if self.detector is None else self.start_ms + self.detector.last_speech_ms

    def append(self, data: bytes) -> list[TurnEvent]:
        """Add the client's audio; the turn events it completes, in session milliseconds."""
        return self.append_samples(self.decoder.decode(data))

    def append_samples(self, samples: FloatArray) -> list[TurnEvent]:
        """Add audio already at the analysis rate (a face that decodes its own)."""
        self._samples = np.concatenate([self._samples, samples])
        self.total += len(samples)
        return self._heard_events(self.detector.feed(samples) if self.detector else [])

    def go_on(self, verdict: Verdict | None = None) -> list[TurnEvent]:
        """Past what the detector holds: a pause, with its `verdict`; the end of a turn,
        once it has been taken. The events of the audio held behind it."""
        if self.detector is None:
            return []
        if verdict is None:
            return self._heard_events(self.detector.go_on())
        return self._heard_events(self.detector.decide(verdict))

    def _heard_events(self, events: list[TurnEvent]) -> list[TurnEvent]:
        keep = MAX_SAMPLES
        if (
            self.vad is not None
            and not self.speaking
            and not any(isinstance(e, SpeechStop | NoWords) for e in events)
        ):
            keep = self.vad.prefix_padding_ms * ANALYSIS_RATE // 1000 + 2 * WINDOW
        self._trim(keep + (self.detector.unheard if self.detector else 0))
        return [type(e)(self.start_ms + e.ms) for e in events]

    def peek(self) -> FloatArray:
        """The audio heard so far (while a turn is spoken: all of it so far), left in place."""
        return self._samples[: self._heard].copy()

    def take(self, start_ms: int | None = None) -> FloatArray:
        """The turn's samples (from `start_ms` less the prefix padding, when given), emptying
        the buffer for the next turn (of all but what the detector has not heard yet)."""
        heard = self._heard
        samples = self._samples[:heard]
        if start_ms is not None and self.vad is not None:
            first = (start_ms - self.start_ms - self.vad.prefix_padding_ms) * ANALYSIS_RATE // 1000
            samples = samples[max(0, first - self._held_from) :]
        self._forget(heard)
        return samples

    def clear(self) -> None:
        """Forget the audio held (a client's clear, or a turn of no words)."""
        self._forget(self._heard)

    def _forget(self, samples: int) -> None:
        self._held_from += samples
        self._samples = self._samples[samples:]
        self.item_id = new_id("item")

    def _trim(self, keep: int) -> None:
        excess = len(self._samples) - keep
        if excess > 0:
            self._samples = self._samples[excess:]
            self._held_from += excess
