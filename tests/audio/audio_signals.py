"""Test signals shared by the audio tests: a tone, uneven chunking, a pitch detector."""

import numpy as np

from voicestream.audio import ENGINE_SAMPLE_RATE
from voicestream.audio.pcm import FloatArray

TONE_HZ = 220.0
DURATION_S = 1.3
CHUNK_SECONDS = (0.11, 0.5, 0.07, 0.3, 0.02)  # the rest (0.3 s) is the last chunk


def tone(duration_s: float, rate: int = ENGINE_SAMPLE_RATE) -> FloatArray:
    """A 220 Hz sine at 0.6 with 50 ms fades, so no codec sees a hard edge."""
    t = np.arange(round(duration_s * rate)) / rate
    envelope = np.clip(np.minimum(t, duration_s - t) / 0.05, 0.0, 1.0)
    return (0.6 * envelope * np.sin(2 * np.pi * TONE_HZ * t)).astype(np.float32)


def uneven_chunks(samples: FloatArray, rate: int = ENGINE_SAMPLE_RATE) -> list[FloatArray]:
    cuts = np.cumsum([round(s * rate) for s in CHUNK_SECONDS])
    return np.split(samples, cuts)


def dominant_frequency(samples: FloatArray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return float(np.fft.rfftfreq(len(samples), 1 / rate)[np.argmax(spectrum)])
