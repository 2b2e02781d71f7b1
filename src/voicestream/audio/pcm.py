"""Sample conversions between float audio and the integer wire formats.

Scaling follows FFmpeg (`x * 32768`, rounded, clipped to the int16 range, and `/ 32768`
back), so what we write and what FFmpeg-based decoders read agree to the last bit.
"""

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]

_PCM16_SCALE = 32768.0

# G.711 mu-law: 14-bit magnitude plus a bias of 33 (0x84 >> 2), in eight segments.
_MULAW_BIAS = 0x84
_MULAW_MAX_BIASED = 0x1FFF


def float_to_pcm16(samples: npt.ArrayLike) -> npt.NDArray[np.int16]:
    """Float samples in [-1, 1] to int16; out-of-range values are clipped, not wrapped."""
    scaled = np.rint(np.asarray(samples, dtype=np.float32) * _PCM16_SCALE)
    return np.clip(scaled, -32768, 32767).astype(np.int16)


def pcm16_to_float(data: bytes) -> FloatArray:
    """Raw signed 16-bit little-endian bytes to float32 in [-1, 1)."""
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / np.float32(_PCM16_SCALE)


def _build_mulaw_encode_table() -> npt.NDArray[np.uint8]:
    """The mu-law byte for every int16 value (indexed by the value as uint16).

    A 64 KiB table turns encoding into one vectorised lookup.
    """
    pcm = np.arange(65536, dtype=np.uint16).view(np.int16).astype(np.int32) >> 2
    mask = np.where(pcm < 0, 0x7F, 0xFF)
    magnitude = np.minimum(np.abs(pcm) + (_MULAW_BIAS >> 2), _MULAW_MAX_BIASED)
    # Segment = position of the highest set bit above bit 5 (0..7).
    segment = np.clip(np.floor(np.log2(magnitude)).astype(np.int32) - 5, 0, 7)
    code = (segment << 4) | ((magnitude >> (segment + 1)) & 0x0F)
    return np.asarray(code ^ mask, dtype=np.uint8)


def _build_mulaw_decode_table() -> npt.NDArray[np.int16]:
    code = ~np.arange(256, dtype=np.int32) & 0xFF
    magnitude = (((code & 0x0F) << 3) + _MULAW_BIAS) << ((code & 0x70) >> 4)
    return np.where(code & 0x80, _MULAW_BIAS - magnitude, magnitude - _MULAW_BIAS).astype(np.int16)


_MULAW_ENCODE = _build_mulaw_encode_table()
_MULAW_DECODE = _build_mulaw_decode_table()


def float_to_mulaw(samples: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """Float samples in [-1, 1] to G.711 mu-law bytes."""
    return _MULAW_ENCODE[float_to_pcm16(samples).view(np.uint16)]


def mulaw_to_float(data: bytes) -> FloatArray:
    """G.711 mu-law bytes to float32 in [-1, 1)."""
    pcm = _MULAW_DECODE[np.frombuffer(data, dtype=np.uint8)]
    return pcm.astype(np.float32) / np.float32(_PCM16_SCALE)
