"""Turn detection with a real voice-activity model: Silero VAD (v6), which faster-whisper
ships as ONNX, run with ONNX Runtime one 32 ms window at a time as the audio arrives.

`TurnDetector` turns the model's speech probabilities into the Realtime API's turn events:
speech starts at the first window at or above the threshold, and stops once the probability
has stayed below it (less a small hysteresis) for the silence duration. A shorter silence
is a `Pause`: the turn may end there, so its transcription can start before the stop is
certain. Times are in milliseconds of input audio since the session started, as the API
counts them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from voicestream.agent.realtime.codecs import ANALYSIS_RATE
from voicestream.audio.pcm import FloatArray

WINDOW = 512
"""Samples per model step at 16 kHz (32 ms), with `CONTEXT` samples of the previous step."""
CONTEXT = 64
WINDOW_MS = WINDOW * 1000 // ANALYSIS_RATE
HYSTERESIS = 0.15
"""Silence is a probability below the threshold less this (Silero's own default gap)."""
PAUSE_MS = 160
"""Silence this long (at most half the silence duration) is a `Pause`: long enough that a
word's own gaps rarely reach it, early enough that Whisper (about 0.3 s for a question on
two cores) has heard the turn by the time the silence duration ends it."""

_session: Any = None
_session_lock = threading.Lock()


class VadUnavailable(Exception):
    """faster-whisper (the `asr` extra) or ONNX Runtime is not installed."""


def _model() -> Any:
    """The ONNX session, loaded once per process (single-threaded: a step is ~0.1 ms)."""
    global _session
    with _session_lock:
        if _session is None:
            try:
                import onnxruntime

                path = resources.files("faster_whisper") / "assets" / "silero_vad_v6.onnx"
            except ImportError as error:
                raise VadUnavailable(
                    "server VAD needs faster-whisper: install the asr extra"
                ) from error
            options = onnxruntime.SessionOptions()
            options.inter_op_num_threads = options.intra_op_num_threads = 1
            options.log_severity_level = 4
            _session = onnxruntime.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        return _session


class SileroVad:
    """One stream's speech probabilities, a window at a time (the LSTM state carried)."""

    def __init__(self) -> None:
        self._session = _model()
        self._h = np.zeros((1, 1, 128), np.float32)
        self._c = np.zeros((1, 1, 128), np.float32)
        self._context = np.zeros(CONTEXT, np.float32)
        self._pending = np.zeros(0, np.float32)

    def probabilities(self, samples: FloatArray) -> list[float]:
        """One probability per whole window of `samples` (16 kHz), in order; a partial window
        waits for the next call."""
        self._pending = np.concatenate([self._pending, samples.astype(np.float32)])
        count = len(self._pending) // WINDOW
        if not count:
            return []
        windows = self._pending[: count * WINDOW].reshape(count, WINDOW)
        self._pending = self._pending[count * WINDOW :]
        contexts = np.vstack([self._context, windows[:-1, -CONTEXT:]])
        self._context = windows[-1, -CONTEXT:].copy()
        batch = np.concatenate([contexts, windows], axis=1)
        probs, self._h, self._c = self._session.run(
            None, {"input": batch, "h": self._h, "c": self._c}
        )
        return [float(p) for p in np.ravel(probs)]


@dataclass(frozen=True, slots=True)
class SpeechStart:
    ms: int


@dataclass(frozen=True, slots=True)
class SpeechStop:
    ms: int


@dataclass(frozen=True, slots=True)
class Pause:
    """Speech that ended at `ms` has been followed by `PAUSE_MS` of silence; a `SpeechStop`
    at the same `ms` follows unless the speaker goes on."""

    ms: int


class TurnDetector:
    """Speech start and stop events from a stream of 16 kHz samples."""

    def __init__(self, threshold: float, silence_duration_ms: int) -> None:
        self.threshold = threshold
        self.silence_duration_ms = silence_duration_ms
        self.vad = SileroVad()
        self.pause_ms = min(PAUSE_MS, silence_duration_ms // 2)
        self.vad = SileroVad()
        self.speaking = False
        self.last_speech_ms = 0
        """Where the last window of speech ended."""
        self._window = 0
        self._paused = False

    def feed(self, samples: FloatArray) -> list[SpeechStart | SpeechStop | Pause]:
        events: list[SpeechStart | SpeechStop | Pause] = []
        for probability in self.vad.probabilities(samples):
            start_ms = self._window * WINDOW_MS
            self._window += 1
            silent_ms = start_ms + WINDOW_MS - self.last_speech_ms
            if probability >= self.threshold:
                self.last_speech_ms = start_ms + WINDOW_MS
                self._paused = False
                if not self.speaking:
                    self.speaking = True
                    events.append(SpeechStart(start_ms))
            elif not self.speaking or probability >= self.threshold - HYSTERESIS:
                continue
            elif silent_ms >= self.silence_duration_ms:
                self.speaking = False
                events.append(SpeechStop(self.last_speech_ms))
            elif silent_ms >= self.pause_ms and not self._paused:
                self._paused = True
                events.append(Pause(self.last_speech_ms))
        return events
