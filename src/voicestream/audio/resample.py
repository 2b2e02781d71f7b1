"""Sample-rate conversion with soxr, one-shot or chunk by chunk.

Resampling each chunk on its own would restart the filter at every sentence boundary
(a click, and a few samples lost or gained each time). `StreamResampler` keeps one soxr
stream for the whole utterance, so the chunked output matches a one-shot conversion.
"""

import numpy as np
import numpy.typing as npt
import soxr

from voicestream.audio.pcm import FloatArray

QUALITY = "HQ"
"""soxr's 20-bit quality: far beyond what 16-bit output or a lossy codec can carry."""

_EMPTY = np.zeros(0, dtype=np.float32)


def resample(samples: npt.ArrayLike, input_rate: int, output_rate: int) -> FloatArray:
    """Convert a whole mono float signal from `input_rate` to `output_rate`."""
    signal = np.asarray(samples, dtype=np.float32)
    if input_rate == output_rate:
        return signal
    return np.asarray(soxr.resample(signal, input_rate, output_rate, quality=QUALITY), np.float32)


class StreamResampler:
    """Converts a mono float stream chunk by chunk; call `flush` once after the last chunk."""

    def __init__(self, input_rate: int, output_rate: int) -> None:
        self.input_rate = input_rate
        self.output_rate = output_rate
        self._stream: soxr.ResampleStream | None = None
        if input_rate != output_rate:
            self._stream = soxr.ResampleStream(
                input_rate, output_rate, num_channels=1, dtype="float32", quality=QUALITY
            )

    def process(self, samples: npt.ArrayLike) -> FloatArray:
        """Resample one chunk; returns what is ready (the filter holds back a short tail)."""
        signal = np.asarray(samples, dtype=np.float32)
        if self._stream is None:
            return signal
        return np.asarray(self._stream.resample_chunk(signal), dtype=np.float32)

    def flush(self) -> FloatArray:
        """Return the held-back tail; the stream is then finished."""
        if self._stream is None:
            return _EMPTY
        return np.asarray(self._stream.resample_chunk(_EMPTY, last=True), dtype=np.float32)
