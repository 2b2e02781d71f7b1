"""Whether a turn is finished, judged at a pause (`semantic_vad`): from the audio, by Smart
Turn v3, and from the words heard so far.

Smart Turn v3 (Daily, BSD-2-Clause) reads Whisper's log-mel features of the turn's last 8 s at
16 kHz and gives the probability that the speaker has finished. Its ONNX file (8.7 MB) ships
in the ``pipecat-ai`` wheel; it is read from there (never imported: pipecat is not a
dependency of the agent) or from the path VOICESTREAM_TURN_MODEL names, and run on ONNX
Runtime, one thread, only at pauses. The features are faster-whisper's own (the same numbers
as pipecat's and ``transformers``' Whisper extractor, without torch).

The words, by rule: a turn whose transcript trails off (a comma, an ellipsis, or a last word
such as "and", "the", "to" that leaves the sentence open) is not finished, whatever the audio
says. A turn in which Whisper heard no words was noise, and no turn at all.

The words, by a language model (`TextTurn`): SmolLM2-135M-Instruct, the local LLM's own GGUF,
read as LiveKit's turn detector reads a transcript: the user's message so far (lowercased,
without punctuation, since Whisper's punctuation of a cut sentence is a guess) in the chat
template, and the probability that the next token closes it ("?", ".", "!", a new line or the
end of the message). "who painted" (0.02) goes on; "who painted the mona lisa" (0.07),
"what is the capital of france" (0.81) are finished. Without it (llama-cpp-python or the
weights not installed), a transcript with no closing punctuation counts as unfinished.

The verdict: **sure** where the audio and the words both say finished (the turn ends after a
short confirmation), **finished** where one of them does (a longer one, which a speaker who
only paused outlasts), **goes on** where neither does.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import re
import threading
import time
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from voicestream.agent.realtime.codecs import ANALYSIS_RATE
from voicestream.audio.pcm import FloatArray

logger = logging.getLogger(__name__)

PIPECAT_DISTRIBUTION = "pipecat-ai"
PIPECAT_MODEL = "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"
WINDOW_S = 8
"""Smart Turn hears the turn's last 8 s (less is padded with silence before it)."""
FINISHED_PROBABILITY = 0.5
"""Smart Turn's own cut (pipecat's): at or above it, the audio says the turn is finished."""
TEXT_FINISHED_PROBABILITY = 0.05
"""At or above it, `TextTurn` says the words are finished. Measured on 13 questions cut after a
word (at most 0.03, but 0.15 for "what is the tallest mountain", a question of its own) and 20
whole ones (at least 0.07)."""
TEXT_CONTEXT = 128
"""Tokens `TextTurn` reads: the chat template's opening and the turn's last words."""
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
    SURE = "sure"
    """Finished, by the audio and the words both: the turn ends after the short confirmation."""
    FINISHED = "finished"
    """Finished by one of them: the turn ends after the longer confirmation."""
    GOES_ON = "goes_on"
    """Unfinished: the turn waits for more speech (at most the eagerness's pause)."""
    NO_WORDS = "no_words"
    """Nothing was said (noise, a cough, clicks): the turn ends and nothing is committed."""


def trails_off(transcript: str, closing_required: bool = True) -> bool:
    """The words leave the sentence open (Whisper's punctuation and the last word); with
    `closing_required`, so does a transcript with no closing punctuation."""
    text = transcript.strip().rstrip("\"')]»”’").rstrip()
    if text.endswith(TRAILING) or (closing_required and not text.endswith(CLOSING)):
        return True
    words = _WORD.findall(text.lower())
    return bool(words) and words[-1] in OPEN_WORDS


def words_verdict(transcript: str, closing_required: bool = True) -> Verdict | None:
    """What the words settle by rule: nothing said (`NO_WORDS`), a sentence left open
    (`GOES_ON`), or nothing (None: the models judge)."""
    words = _ANNOTATION.sub("", transcript)
    if not _WORD.search(words.lower()):
        return Verdict.NO_WORDS
    if trails_off(words, closing_required):
        return Verdict.GOES_ON
    return None


def verdict(probability: float, transcript: str | None, text_probability: float | None = None) -> Verdict:
    """The turn's verdict from Smart Turn's `probability`, the words heard so far (None:
    Whisper could not say) and `TextTurn`'s `text_probability` of them (None: not asked)."""
    if transcript is not None:
        ruled = words_verdict(transcript, closing_required=text_probability is None)
        if ruled is not None:
            return ruled
    audio = probability >= FINISHED_PROBABILITY
    text = text_probability is not None and text_probability >= TEXT_FINISHED_PROBABILITY
    if audio and text:
        return Verdict.SURE
    return Verdict.FINISHED if audio or text else Verdict.GOES_ON


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


TEXT_OFF = "off"
"""`turn_text_model` that turns `TextTurn` off."""
_PUNCTUATION = re.compile(r"[^\w\s']+")


def text_model_path(configured: str | None = None) -> Path:
    """`configured`, else the local LLM's SmolLM2 GGUF; raises `TurnModelUnavailable`."""
    if configured:
        path = Path(configured)
    else:
        from voicestream.agent.local_llm import LocalModelError, default_model_path

        try:
            path = default_model_path()
        except LocalModelError as error:
            raise TurnModelUnavailable(str(error)) from None
    if not path.is_file():
        raise TurnModelUnavailable(f"there is no GGUF model at {path}")
    return path


def normalized(transcript: str) -> str:
    """The words as `TextTurn` reads them: annotations and punctuation out, lowercase."""
    text = _PUNCTUATION.sub(" ", _ANNOTATION.sub(" ", transcript).lower())
    return " ".join(text.split())


class TextTurn:
    """Whether the words so far end the user's message, by a small chat model (see the
    module's docstring) on llama.cpp: one context per process and model file, one thread,
    one run at a time, only at pauses the rules leave open. `runs` and `cpu_s` as
    `SmartTurn`'s."""

    _loaded: ClassVar[dict[Path, TextTurn]] = {}
    _loading: ClassVar[threading.Lock] = threading.Lock()
    _unavailable_said: ClassVar[bool] = False
    ENDS: ClassVar[tuple[str, ...]] = ("<|im_end|>", "?", ".", "!", "\n")
    OPENING = "<|im_start|>user\n"

    def __init__(self, path: Path) -> None:
        try:
            from llama_cpp import Llama, llama_get_logits_ith
        except ImportError:
            raise TurnModelUnavailable("the words' end-of-turn model needs llama-cpp-python") from None
        try:
            self._llm = Llama(str(path), n_ctx=TEXT_CONTEXT, n_batch=TEXT_CONTEXT, n_threads=1, verbose=False)
        except (ValueError, RuntimeError) as error:
            raise TurnModelUnavailable(f"llama.cpp cannot load {path}: {error}") from None
        self._opening = self._llm.tokenize(self.OPENING.encode(), add_bos=False, special=True)
        ends = [self._llm.tokenize(end.encode(), add_bos=False, special=True) for end in self.ENDS]
        self._ends = sorted({tokens[0] for tokens in ends if len(tokens) == 1})
        self._logits_ith = llama_get_logits_ith
        self._lock = threading.Lock()
        self.runs = 0
        self.cpu_s = 0.0

    @classmethod
    def load(cls, configured: str | None = None) -> TextTurn:
        """The model (loaded on first use); raises `TurnModelUnavailable`, also for
        `configured` "off"."""
        if configured == TEXT_OFF:
            raise TurnModelUnavailable("the words' end-of-turn model is turned off")
        path = text_model_path(configured)
        with cls._loading:
            if path not in cls._loaded:
                cls._loaded[path] = cls(path)
            return cls._loaded[path]

    @classmethod
    def load_optional(cls, configured: str | None = None) -> TextTurn | None:
        """The model, or None where it is off or not installed (said once per process: the
        words are then judged by their punctuation)."""
        try:
            return cls.load(configured)
        except TurnModelUnavailable as error:
            with cls._loading:
                if not cls._unavailable_said:
                    cls._unavailable_said = True
                    if configured != TEXT_OFF:
                        logger.warning("semantic_vad judges the words by their punctuation: %s", error)
            return None

    def probability(self, transcript: str) -> float:
        """How likely the user's message ends after `transcript` (0 for no words)."""
        text = normalized(transcript)
        if not text:
            return 0.0
        room = TEXT_CONTEXT - len(self._opening)
        tokens = self._llm.tokenize(text.encode(), add_bos=False, special=False)[-room:]
        with self._lock:
            began = time.thread_time()
            self._llm.reset()
            self._llm.eval([*self._opening, *tokens])
            last = self._logits_ith(self._llm.ctx, -1)  # the last token's: all that was computed
            logits = np.ctypeslib.as_array(last, shape=(self._llm.n_vocab(),))
            scores = logits.astype(np.float64) - float(logits.max())
            chances = np.exp(scores)
            self.runs += 1
            self.cpu_s += time.thread_time() - began
        return float(chances[self._ends].sum() / chances.sum())

    async def probability_async(self, transcript: str) -> float:
        return await asyncio.to_thread(self.probability, transcript)
