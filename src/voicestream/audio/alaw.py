"""G.711 A-law, the European telephony twin of mu-law (Deepgram's ``encoding=alaw``).

Not one of the protocol's formats (`create_encoder` does not offer it): the Deepgram-
compatible routes build it themselves, as the Cartesia ones build `Float32Encoder`.
"""

import numpy as np
import numpy.typing as npt

from voicestream.audio.encoder import StreamEncoder
from voicestream.audio.pcm import FloatArray, float_to_pcm16

_SEGMENT_ENDS = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF])
"""The largest 13-bit magnitude of each of A-law's eight segments (ITU-T G.711)."""


def _build_alaw_encode_table() -> npt.NDArray[np.uint8]:
    """The A-law byte for every int16 value (indexed by the value as uint16), as the
    reference encoder computes it: 13-bit magnitude, segment, four mantissa bits, and the
    even bits inverted (0x55)."""
    pcm = np.arange(65536, dtype=np.uint16).view(np.int16).astype(np.int32) >> 3
    mask = np.where(pcm >= 0, 0xD5, 0x55)
    magnitude = np.where(pcm >= 0, pcm, -pcm - 1)
    segment = np.searchsorted(_SEGMENT_ENDS, magnitude)
    mantissa = np.where(segment < 2, magnitude >> 1, magnitude >> segment) & 0x0F
    code = (segment << 4) | mantissa
    return np.asarray(code ^ mask, dtype=np.uint8)


_ALAW_ENCODE = _build_alaw_encode_table()


def float_to_alaw(samples: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """Float samples in [-1, 1] to G.711 A-law bytes."""
    return _ALAW_ENCODE[float_to_pcm16(samples).view(np.uint16)]


class AlawEncoder(StreamEncoder):
    """G.711 A-law, one byte per sample, no header."""

    format = "alaw"
    content_type = "audio/x-alaw-basic"

    def _encode(self, samples: FloatArray) -> bytes:
        return float_to_alaw(samples).tobytes()

    def _finish(self) -> bytes:
        return b""
