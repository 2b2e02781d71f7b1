"""Turn detection with a real voice-activity model: Silero VAD (v6), which faster-whisper
ships as ONNX, run with ONNX Runtime one 32 ms window at a time as the audio arrives.

`TurnDetector` turns the model's speech probabilities into the Realtime API's turn events:
speech starts at the first window at or above the threshold, and stops once the probability
has stayed below it (less a small hysteresis) for the silence duration. A shorter silence
is a `Pause`: the turn may end there, so its transcription can start before the stop is
certain. Times are in milliseconds of input audio since the session started, as the API
counts them.

Judged (`semantic_vad`), a pause is a question: the detector holds the audio after it until
`decide` is given the verdict (`end_of_turn`), so that a turn ends where it was judged
finished in the audio's own time, however long the verdict took, and what follows is heard
after it; the silence duration is then the longest an unfinished turn may pause. A pause
judged finished ends the turn once its silence lasts `confirm_ms` (`sure_ms` where the verdict
is sure; at once with 0); speech before then is `Resumed` and the turn goes on. Speech
starts only after `MIN_SPEECH_WINDOWS` windows of it in a row (a click or a beep is one).
Either way the detector also holds after each end of a turn, until the turn has been taken
from the buffer (`go_on`): what follows belongs to the next turn.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from voicestream.agent.realtime.codecs import ANALYSIS_RATE
from voicestream.agent.realtime.end_of_turn import Verdict
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
MIN_SPEECH_WINDOWS = 3
"""Judged, speech starts after this many windows of it in a row (96 ms): a beep, a click or a
chord that Silero scores as speech for a window or two starts no turn."""

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

    @property
    def partial(self) -> int:
        """Samples waiting for a whole window."""
        return len(self._pending)

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


@dataclass(frozen=True, slots=True)
class Resumed:
    """The speaker went on (speech again at `ms`) after a pause judged finished, before the
    silence confirmed it: the turn goes on."""

    ms: int


@dataclass(frozen=True, slots=True)
class NoWords:
    """Judged: the speech that started was no words (noise); it ended at `ms`, as no turn."""

    ms: int


TurnEvent = SpeechStart | SpeechStop | Pause | NoWords | Resumed


class TurnDetector:
    """Speech start and stop events from a stream of 16 kHz samples; with `judged`, a pause
    waits for its verdict (`decide`)."""

    def __init__(
        self,
        threshold: float,
        silence_duration_ms: int,
        judged: bool = False,
        confirm_ms: int = 0,
        sure_ms: int | None = None,
    ) -> None:
        self.threshold = threshold
        self.silence_duration_ms = silence_duration_ms
        self.judged = judged
        self.confirm_ms = confirm_ms
        """Judged finished, the turn ends once its silence has lasted this long (at once with
        0); speech before then is `Resumed`."""
        self.sure_ms = confirm_ms if sure_ms is None else min(sure_ms, confirm_ms)
        """The same, judged sure."""
        self.confirming: int | None = None
        """The silence (ms) a turn judged finished waits for before it ends; None: no turn is
        being confirmed."""
        self.pause_ms = min(PAUSE_MS, silence_duration_ms // 2)
        self.min_speech = MIN_SPEECH_WINDOWS if judged else 1
        self.vad = SileroVad()
        self.speaking = False
        self.last_speech_ms = 0
        """Where the last window of speech ended."""
        self.holding: TurnEvent | None = None
        """The event the windows after wait on: a judged `Pause` (for `decide`), or the end
        of a turn (for `go_on`)."""
        self._held: deque[float] = deque()
        """Probabilities of windows not yet heard (while holding)."""
        self._window = 0
        self._run = 0
        """Windows of speech in a row, up to the one heard last."""
        self._paused = False

    @property
    def unheard(self) -> int:
        """Samples received after the last window heard (none unless holding)."""
        return len(self._held) * WINDOW + self.vad.partial if self.holding else 0

    def feed(self, samples: FloatArray) -> list[TurnEvent]:
        self._held.extend(self.vad.probabilities(samples))
        return self._hear()

    def decide(self, verdict: Verdict) -> list[TurnEvent]:
        """The verdict on the pause held (`holding`): the turn ends there, or goes on."""
        match self.holding:
            case Pause(ms=ms):
                pass
            case _:
                raise RuntimeError("no pause waits for a verdict")
        if verdict is Verdict.GOES_ON:
            self.holding = None
            return self._hear()
        finished = verdict in (Verdict.FINISHED, Verdict.SURE)
        wait = self.sure_ms if verdict is Verdict.SURE else self.confirm_ms
        if finished and wait > 0:
            self.holding = None
            self.confirming = wait
            return self._hear()
        self.speaking = False
        self.holding = SpeechStop(ms) if finished else NoWords(ms)
        return [self.holding]

    def go_on(self) -> list[TurnEvent]:
        """After the end of a turn (once taken from the buffer): hear what came after it."""
        match self.holding:
            case SpeechStop() | NoWords():
                self.holding = None
            case _:
                raise RuntimeError("no end of a turn is held")
        return self._hear()

    def _hear(self) -> list[TurnEvent]:
        events: list[TurnEvent] = []
        while self._held and self.holding is None:
            probability = self._held.popleft()
            start_ms = self._window * WINDOW_MS
            self._window += 1
            if probability >= self.threshold:
                self._run += 1
                if self.confirming is not None and self._run < self.min_speech:
                    continue  # a click in the silence confirming a turn does not break it
                if self.speaking or self._run >= self.min_speech:
                    self.last_speech_ms = start_ms + WINDOW_MS
                    self._paused = False
                    if self.confirming is not None:
                        self.confirming = None
                        events.append(Resumed(start_ms - (self._run - 1) * WINDOW_MS))
                    if not self.speaking:
                        self.speaking = True
                        events.append(SpeechStart(start_ms - (self._run - 1) * WINDOW_MS))
                continue
            self._run = 0
            if not self.speaking or probability >= self.threshold - HYSTERESIS:
                continue
            silent_ms = start_ms + WINDOW_MS - self.last_speech_ms
            if silent_ms >= self.silence_duration_ms or (self.confirming is not None and silent_ms >= self.confirming):
                self.speaking = False
                self.confirming = None
                self.holding = SpeechStop(self.last_speech_ms)
                events.append(self.holding)
            elif silent_ms >= self.pause_ms and not self._paused:
                self._paused = True
                events.append(Pause(self.last_speech_ms))
                if self.judged:
                    self.holding = events[-1]
        return events
