"""The Realtime socket's audio formats, to and from what the agent works in: the speech
server's pcm16 at 24 kHz out, and 16 kHz float samples in (what Silero VAD and Whisper take).

``audio/pcm`` is pcm16 at 24 kHz; ``audio/pcmu`` and ``audio/pcma`` are G.711 mu-law and
A-law at 8 kHz (telephony). Each direction keeps one resampler per stream, so that chunk
boundaries leave no clicks.
"""

from __future__ import annotations

import base64

import numpy as np
import numpy.typing as npt

from voicestream.audio import (
    StreamResampler,
    float_to_mulaw,
    float_to_pcm16,
    mulaw_to_float,
    pcm16_to_float,
)
from voicestream.audio.pcm import FloatArray

ANALYSIS_RATE = 16_000
SPEECH_RATE = 24_000


def _alaw_encode_table() -> npt.NDArray[np.uint8]:
    """The A-law byte of every int16 value (indexed by the value as uint16), as G.711's
    reference coder computes it."""
    pcm = np.arange(65536, dtype=np.uint16).view(np.int16).astype(np.int32) >> 3
    mask = np.where(pcm >= 0, 0xD5, 0x55)
    magnitude = np.where(pcm >= 0, pcm, -pcm - 1)
    segment_ends = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF])
    segment = np.searchsorted(segment_ends, magnitude)
    shift = np.where(segment < 2, 1, segment)
    code = (np.minimum(segment, 7) << 4) | ((magnitude >> np.minimum(shift, 7)) & 0x0F)
    code = np.where(segment >= 8, 0x7F, code)
    return np.asarray(code ^ mask, dtype=np.uint8)


def _alaw_decode_table() -> npt.NDArray[np.int16]:
    value = np.arange(256, dtype=np.int32) ^ 0x55
    mantissa = (value & 0x0F) << 4
    segment = (value & 0x70) >> 4
    linear = np.where(segment == 0, mantissa + 8, (mantissa + 0x108) << np.maximum(segment - 1, 0))
    return np.where(value & 0x80, linear, -linear).astype(np.int16)


_ALAW_ENCODE = _alaw_encode_table()
_ALAW_DECODE = _alaw_decode_table()


def float_to_alaw(samples: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    return _ALAW_ENCODE[float_to_pcm16(samples).view(np.uint16)]


def alaw_to_float(data: bytes) -> FloatArray:
    return _ALAW_DECODE[np.frombuffer(data, dtype=np.uint8)].astype(np.float32) / np.float32(32768)


class InputDecoder:
    """Appended audio of one format (its raw bytes) to 16 kHz float samples."""

    def __init__(self, format_type: str) -> None:
        self.format_type = format_type
        rate = SPEECH_RATE if format_type == "audio/pcm" else 8000
        self._resampler = StreamResampler(rate, ANALYSIS_RATE)
        self._odd = b""

    def decode(self, data: bytes) -> FloatArray:
        if self.format_type == "audio/pcm":
            data, self._odd = self._odd + data, b""
            if len(data) % 2:
                data, self._odd = data[:-1], data[-1:]
            samples = pcm16_to_float(data)
        elif self.format_type == "audio/pcmu":
            samples = mulaw_to_float(data)
        else:
            samples = alaw_to_float(data)
        return self._resampler.process(samples)


class OutputEncoder:
    """The speech server's pcm16 at 24 kHz (base64, as the agent's events carry it) to the
    session's output format (base64)."""

    def __init__(self, format_type: str) -> None:
        self.format_type = format_type
        self._resampler = None if format_type == "audio/pcm" else StreamResampler(SPEECH_RATE, 8000)

    def encode(self, pcm16_base64: str) -> str:
        if self._resampler is None:
            return pcm16_base64
        samples = self._resampler.process(pcm16_to_float(base64.b64decode(pcm16_base64)))
        encoded = (
            float_to_mulaw(samples) if self.format_type == "audio/pcmu" else float_to_alaw(samples)
        )
        return base64.b64encode(encoded.tobytes()).decode("ascii")
