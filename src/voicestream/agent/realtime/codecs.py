"""The Realtime socket's audio formats, to and from what the agent works in: the speech
server's pcm16 at 24 kHz out, and 16 kHz float samples in (what Silero VAD and Whisper take).

``audio/pcm`` is pcm16 at 24 kHz; ``audio/pcmu`` and ``audio/pcma`` are G.711 mu-law and
A-law at 8 kHz (telephony). Each direction keeps one resampler per stream, so that chunk
boundaries leave no clicks.
"""

from __future__ import annotations

import base64

from voicestream.audio import (
    StreamResampler,
    alaw_to_float,
    float_to_alaw,
    float_to_mulaw,
    mulaw_to_float,
    pcm16_to_float,
)
from voicestream.audio.pcm import FloatArray

ANALYSIS_RATE = 16_000
SPEECH_RATE = 24_000


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
