"""Sample conversions between float audio and the integer wire formats.

Scaling follows FFmpeg (`x * 32768`, rounded, clipped to the int16 range, and `/ 32768`
back), so what we write and what FFmpeg-based decoders read agree to the last bit.
"""

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]

_PCM16_SCALE = 32768.0


def float_to_pcm16(samples: npt.ArrayLike) -> npt.NDArray[np.int16]:
    """Float samples in [-1, 1] to int16; out-of-range values are clipped, not wrapped."""
    scaled = np.rint(np.asarray(samples, dtype=np.float32) * _PCM16_SCALE)
    return np.clip(scaled, -32768, 32767).astype(np.int16)


def pcm16_to_float(data: bytes) -> FloatArray:
    """Raw signed 16-bit little-endian bytes to float32 in [-1, 1)."""
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / np.float32(_PCM16_SCALE)
