"""Whether a turn is finished, judged at a pause (`semantic_vad`): from the audio, by Smart
Turn v3, and from the words heard so far.

Smart Turn v3 (Daily, BSD-2-Clause) reads Whisper's log-mel features of the turn's last 8 s at
16 kHz and gives the probability that the speaker has finished. Its ONNX file (8.7 MB) ships
in the ``pipecat-ai`` wheel; it is read from there (never imported: pipecat is not a
dependency of the agent) or from the path VOICESTREAM_TURN_MODEL names, and run on ONNX
Runtime, one thread, only at pauses. The features are faster-whisper's own (the same numbers
as pipecat's and ``transformers``' Whisper extractor, without torch).

The words veto: a turn whose transcript trails off (a comma, an ellipsis, no closing
punctuation at all, or a last word such as "and", "the", "to" that leaves the sentence
open) is not finished, whatever the audio says. A turn in which Whisper heard no words was
noise, and no turn at all.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import re
import threading
import time
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from voicestream.agent.realtime.codecs import ANALYSIS_RATE
from voicestream.audio.pcm import FloatArray

PIPECAT_DISTRIBUTION = "pipecat-ai"
PIPECAT_MODEL = "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"
WINDOW_S = 8
"""Smart Turn hears the turn's last 8 s (less is padded with silence before it)."""
FINISHED_PROBABILITY = 0.5
"""Smart Turn's own cut (pipecat's): at or above it, the audio says the turn is finished."""
CLOSING = (".", "?", "!")
TRAILING = (",", ";", ":", "-", "–", "—", "…", "...")
OPEN_WORDS = frozenset(
    {"a", "an", "the", "my", "your", "our", "their"}
    | {"and", "or", "but", "nor", "because", "although", "unless", "whether", "than", "to", "of"}
)
"""Words a turn hardly ever ends on: articles and possessives, conjunctions, "to" and "of"
(not prepositions a question may end on: "what is it for?")."""
_WORD = re.compile(r"[a-z']+")
_ANNOTATION = re.compile(r"\[[^\]]*\]|\([^)]*\)|\*[^*]*\*")
"""What Whisper writes for sounds that are not words: "[BLANK_AUDIO]", "(coughs)", "*music*"."""


class TurnModelUnavailable(Exception):
    """Smart Turn's ONNX file (or ONNX Runtime) is not installed here."""


class Verdict(Enum):
    FINISHED = "finished"
    GOES_ON = "goes_on"
    """Unfinished: the turn waits for more speech (at most the eagerness's pause)."""
    NO_WORDS = "no_words"
    """Nothing was said (noise, a cough, clicks): the turn ends and nothing is committed."""


def trails_off(transcript: str) -> bool:
    """The words leave the sentence open (Whisper's punctuation and the last word)."""
    text = transcript.strip().rstrip("\"')]»”’").rstrip()
    if text.endswith(TRAILING) or not text.endswith(CLOSING):
        return True
    words = _WORD.findall(text.lower())
    return bool(words) and words[-1] in OPEN_WORDS


def verdict(probability: float, transcript: str | None) -> Verdict:
    """The turn's verdict from Smart Turn's `probability` and the words heard so far (None:
    Whisper could not say)."""
    if transcript is not None:
        words = _ANNOTATION.sub("", transcript)
        if not _WORD.search(words.lower()):
            return Verdict.NO_WORDS
        if trails_off(words):
            return Verdict.GOES_ON
    return Verdict.FINISHED if probability >= FINISHED_PROBABILITY else Verdict.GOES_ON


def model_path(configured: str | None = None) -> Path:
    """`configured`, else Smart Turn v3 inside the installed pipecat-ai; raises
    `TurnModelUnavailable` when there is no such file."""
    if configured:
        path = Path(configured)
    else:
        try:
            distribution = importlib.metadata.distribution(PIPECAT_DISTRIBUTION)
        except importlib.metadata.PackageNotFoundError:
            raise TurnModelUnavailable(
                "semantic VAD needs Smart Turn v3: install pipecat-ai, or set "
                "VOICESTREAM_TURN_MODEL to its ONNX file"
            ) from None
        path = Path(str(distribution.locate_file(PIPECAT_MODEL)))
    if not path.is_file():
        raise TurnModelUnavailable(f"there is no Smart Turn model at {path}")
    return path


class SmartTurn:
    """Smart Turn v3 on ONNX Runtime: one session per process and model file, one thread,
    one run at a time. `runs` counts its runs (the cost of semantic VAD is one per pause) and
    `cpu_s` the CPU time they took, features included."""

    _loaded: ClassVar[dict[Path, SmartTurn]] = {}
    _loading: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: Path) -> None:
        try:
            import onnxruntime
            from faster_whisper.feature_extractor import FeatureExtractor
        except ImportError as error:
            raise TurnModelUnavailable(f"semantic VAD needs {error.name}") from None
        options = onnxruntime.SessionOptions()
        options.inter_op_num_threads = options.intra_op_num_threads = 1
        options.log_severity_level = 4
        self._session = onnxruntime.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._features = FeatureExtractor(feature_size=80, chunk_length=WINDOW_S)
        self._lock = threading.Lock()
        self.runs = 0
        self.cpu_s = 0.0

    @classmethod
    def load(cls, configured: str | None = None) -> SmartTurn:
        """The model (loaded on first use); raises `TurnModelUnavailable`."""
        path = model_path(configured)
        with cls._loading:
            if path not in cls._loaded:
                cls._loaded[path] = cls(path)
            return cls._loaded[path]

    def features(self, samples: FloatArray) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Whisper's log-mel features (80 x 800) of the last 8 s of `samples` (16 kHz), as
        Smart Turn was trained on them: zero-mean, unit-variance audio, silence before."""
        size = WINDOW_S * ANALYSIS_RATE
        audio = np.zeros(size, np.float32)
        tail = samples[-size:]
        audio[size - len(tail) :] = tail
        audio = (audio - audio.mean()) / np.sqrt(audio.var() + 1e-7)
        return np.asarray(self._features(audio, padding=0), np.float32)

    def probability(self, samples: FloatArray) -> float:
        """How likely the speaker has finished, once `samples` (the turn so far) end."""
        with self._lock:
            began = time.thread_time()  # one thread: the features and the model run here
            features = self.features(samples)[np.newaxis]
            (output,) = self._session.run(None, {"input_features": features})
            self.runs += 1
            self.cpu_s += time.thread_time() - began
        return float(np.ravel(output)[0])

    async def probability_async(self, samples: FloatArray) -> float:
        return await asyncio.to_thread(self.probability, samples)
