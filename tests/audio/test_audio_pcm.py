"""float to pcm16 and back, rounded and clipped as FFmpeg does (G.711 is in test_g711.py)."""

import numpy as np

from voicestream.audio import float_to_pcm16, pcm16_to_float

ALL_INT16 = np.arange(-32768, 32768, dtype=np.int32).astype(np.int16)


def test_pcm16_rounds_and_clips_like_ffmpeg() -> None:
    samples = np.array([0.0, 0.5, -0.5, 1.0, -1.0, 1.7, -1.7, 1.4 / 32768, 1.6 / 32768])
    expected = [0, 16384, -16384, 32767, -32768, 32767, -32768, 1, 2]
    assert float_to_pcm16(samples).tolist() == expected


def test_pcm16_round_trip_is_exact_for_every_value() -> None:
    as_float = pcm16_to_float(ALL_INT16.astype("<i2").tobytes())
    assert np.array_equal(float_to_pcm16(as_float), ALL_INT16)
