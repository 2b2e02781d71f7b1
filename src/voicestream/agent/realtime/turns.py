"""The input audio buffer: what the client appends, at 16 kHz, and the turns found in it.

With server VAD the buffer holds, outside a turn, only the last `prefix_padding_ms` (the
audio a turn keeps from before its start); inside one, the whole turn. Without VAD it holds
everything appended since the last commit or clear. Either way at most
`MAX_SPOKEN_SECONDS` (the oldest audio goes first).
"""

from __future__ import annotations

import numpy as np

from voicestream.agent.realtime.codecs import ANALYSIS_RATE, InputDecoder
from voicestream.agent.realtime.vad import WINDOW, Pause, SpeechStart, SpeechStop, TurnDetector
from voicestream.agent.speech_input import MAX_SPOKEN_SECONDS
from voicestream.audio.pcm import FloatArray
from voicestream.protocol.realtime import ServerVad, new_id

MAX_SAMPLES = int(MAX_SPOKEN_SECONDS * ANALYSIS_RATE)


class InputAudio:
    def __init__(self, format_type: str, vad: ServerVad | None, start_ms: int = 0) -> None:
        self.decoder = InputDecoder(format_type)
        self.vad = vad
        self.detector = TurnDetector(vad.threshold, vad.silence_duration_ms) if vad else None
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
        return len(self._samples) * 1000 // ANALYSIS_RATE

    @property
    def speaking(self) -> bool:
        return self.detector is not None and self.detector.speaking

    @property
    def speech_end_ms(self) -> int | None:
        """Where the speech heard last ended, in session milliseconds (None without VAD)."""
        return None if self.detector is None else self.start_ms + self.detector.last_speech_ms

    def append(self, data: bytes) -> list[SpeechStart | SpeechStop | Pause]:
        """Add the client's audio; the turn events it completes, in session milliseconds."""
        samples = self.decoder.decode(data)
        self._samples = np.concatenate([self._samples, samples])
        self.total += len(samples)
        events = self.detector.feed(samples) if self.detector else []
        keep = MAX_SAMPLES
        if (
            self.vad is not None
            and not self.speaking
            and not any(isinstance(e, SpeechStop) for e in events)
        ):
            keep = self.vad.prefix_padding_ms * ANALYSIS_RATE // 1000 + 2 * WINDOW
        self._trim(keep)
        return [type(e)(self.start_ms + e.ms) for e in events]

    def peek(self) -> FloatArray:
        """The audio held now (while a turn is spoken: all of it so far), left in place."""
        return self._samples.copy()

    def take(self, start_ms: int | None = None) -> FloatArray:
        """The turn's samples (from `start_ms` less the prefix padding, when given), emptying
        the buffer for the next turn."""
        samples = self._samples
        if start_ms is not None and self.vad is not None:
            first = (start_ms - self.start_ms - self.vad.prefix_padding_ms) * ANALYSIS_RATE // 1000
            samples = samples[max(0, first - self._held_from) :]
        self.clear()
        return samples

    def clear(self) -> None:
        self._held_from = self.total
        self._samples = np.zeros(0, np.float32)
        self.item_id = new_id("item")

    def _trim(self, keep: int) -> None:
        excess = len(self._samples) - keep
        if excess > 0:
            self._samples = self._samples[excess:]
            self._held_from += excess
