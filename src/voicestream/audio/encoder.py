"""The shape every streaming encoder shares.

The engine hands over float32 chunks at 24 kHz as they are synthesised; the server sends
whatever bytes each `encode` call returns straight away and the bytes of `finish` last.
The base class owns what is common to every format: input checks, clipping, resampling to
the output rate, and the finished state. Subclasses only turn output-rate samples into
bytes.
"""

from abc import ABC, abstractmethod

import numpy as np
import numpy.typing as npt

from voicestream.audio.errors import AudioError
from voicestream.audio.pcm import FloatArray
from voicestream.audio.resample import StreamResampler


class StreamEncoder(ABC):
    """Encodes one utterance, chunk by chunk, into one audio stream."""

    format: str
    """The wire name of the format (`pcm16`, `wav`, `mp3`, ...)."""
    content_type: str
    """The MIME type to send with the stream."""

    def __init__(self, sample_rate: int, input_rate: int) -> None:
        self.input_rate = input_rate
        self._resampler = StreamResampler(input_rate, sample_rate)
        self._sample_rate = sample_rate
        self._finished = False

    @property
    def sample_rate(self) -> int:
        """The sample rate of the encoded stream, as a decoder will report it."""
        return self._sample_rate

    def encode(self, samples: npt.ArrayLike) -> bytes:
        """Encode one mono float chunk at `input_rate`; returns the bytes ready so far."""
        if self._finished:
            raise AudioError("this encoder is finished; create a new one for the next stream")
        return self._encode(self._resampler.process(_clean(samples)))

    def finish(self) -> bytes:
        """Flush the resampler, the codec and the container trailer; returns the last bytes."""
        if self._finished:
            return b""
        self._finished = True
        return self._encode(self._resampler.flush()) + self._finish()

    @abstractmethod
    def _encode(self, samples: FloatArray) -> bytes:
        """Encode samples already at the output rate and within [-1, 1]."""

    @abstractmethod
    def _finish(self) -> bytes:
        """Flush whatever the format still holds."""


def _clean(samples: npt.ArrayLike) -> FloatArray:
    """A mono float32 copy of the chunk, with NaN silenced and peaks clipped.

    Lossy codecs take floats as given; a stray NaN or a 1.2 peak from the model would
    turn into noise or wrap-around instead of a clipped sample.
    """
    signal = np.ascontiguousarray(samples, dtype=np.float32)
    if signal.ndim != 1:
        raise ValueError(f"expected mono samples as a 1-D array, got shape {signal.shape}")
    if not np.isfinite(signal).all():
        signal = np.nan_to_num(signal, nan=0.0, posinf=1.0, neginf=-1.0)
    return np.clip(signal, -1.0, 1.0)
