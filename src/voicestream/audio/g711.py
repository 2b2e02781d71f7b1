"""ITU-T G.711, the 8-bit telephony codes: mu-law (North America, Japan) and A-law (Europe).

Bit-exact with the ITU's reference coder (G.191's ``g711.c``): each int16 is cut to
G.711's uniform code (14 bits for mu-law, 13 for A-law), a negative one through its ones'
complement, then split into sign, a 3-bit segment and a 4-bit step. The decision values
are G.711's own (a segment's edge is one, so every level is the centre of its interval),
which FFmpeg's encoder, rounding to the nearer level on a 14-bit grid, is not.

Both directions are a table lookup: 64 KiB to encode (indexed by the int16 as uint16),
256 floats to decode.
"""

import numpy as np
import numpy.typing as npt

from voicestream.audio.pcm import FloatArray, float_to_pcm16, pcm16_to_float

_SEGMENT_STARTS = np.array([32, 64, 128, 256, 512, 1024, 2048])
"""Where segments 1 to 7 begin, on the 12-bit magnitude both laws share."""

_MULAW_BIAS = 33
"""Added to mu-law's 14-bit magnitude, so that its segments double like A-law's."""


def _every_int16() -> npt.NDArray[np.int32]:
    """All 65,536 int16 values, in the order of their uint16 bit patterns."""
    return np.arange(65536, dtype=np.uint16).view(np.int16).astype(np.int32)


def _segment(magnitude: npt.NDArray[np.int32]) -> npt.NDArray[np.int32]:
    return np.searchsorted(_SEGMENT_STARTS, magnitude, side="right").astype(np.int32)


def _build_mulaw_encode() -> npt.NDArray[np.uint8]:
    pcm = _every_int16()
    biased = np.minimum((np.where(pcm < 0, ~pcm, pcm) >> 2) + _MULAW_BIAS, 0x1FFF) >> 1
    segment = _segment(biased)
    code = (segment << 4) | ((biased >> segment) & 0x0F)
    return np.asarray(code ^ np.where(pcm < 0, 0x7F, 0xFF), dtype=np.uint8)


def _build_alaw_encode() -> npt.NDArray[np.uint8]:
    pcm = _every_int16()
    magnitude = np.where(pcm < 0, ~pcm, pcm) >> 3
    segment = _segment(magnitude)
    code = (segment << 4) | ((magnitude >> np.maximum(segment, 1)) & 0x0F)
    return np.asarray(code ^ np.where(pcm < 0, 0x55, 0xD5), dtype=np.uint8)


def _build_mulaw_decode() -> FloatArray:
    code = ~np.arange(256, dtype=np.int32) & 0xFF
    segment, mantissa = (code >> 4) & 0x07, code & 0x0F
    magnitude = ((((mantissa << 1) + _MULAW_BIAS) << segment) - _MULAW_BIAS) << 2
    return _as_float(np.where(code & 0x80, -magnitude, magnitude))


def _build_alaw_decode() -> FloatArray:
    code = np.arange(256, dtype=np.int32) ^ 0x55
    segment, mantissa = (code >> 4) & 0x07, code & 0x0F
    leading_one = np.where(segment == 0, 0, 32)
    magnitude = ((mantissa << 1) + leading_one + 1) << np.maximum(segment - 1, 0) << 3
    return _as_float(np.where(code & 0x80, magnitude, -magnitude))


def _as_float(levels: npt.NDArray[np.int32]) -> FloatArray:
    return pcm16_to_float(levels.astype("<i2").tobytes())


_MULAW_ENCODE, _MULAW_DECODE = _build_mulaw_encode(), _build_mulaw_decode()
_ALAW_ENCODE, _ALAW_DECODE = _build_alaw_encode(), _build_alaw_decode()


def float_to_mulaw(samples: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """Float samples in [-1, 1] to G.711 mu-law bytes."""
    return _MULAW_ENCODE[float_to_pcm16(samples).view(np.uint16)]


def mulaw_to_float(data: bytes) -> FloatArray:
    """G.711 mu-law bytes to float32 in [-1, 1)."""
    return _MULAW_DECODE[np.frombuffer(data, dtype=np.uint8)]


def float_to_alaw(samples: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """Float samples in [-1, 1] to G.711 A-law bytes."""
    return _ALAW_ENCODE[float_to_pcm16(samples).view(np.uint16)]


def alaw_to_float(data: bytes) -> FloatArray:
    """G.711 A-law bytes to float32 in [-1, 1)."""
    return _ALAW_DECODE[np.frombuffer(data, dtype=np.uint8)]
