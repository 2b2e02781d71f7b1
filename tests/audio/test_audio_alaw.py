"""The A-law stream encoder (Deepgram's ``encoding=alaw``); its codec is in test_g711.py."""

import numpy as np

from voicestream.audio.alaw import AlawEncoder


def test_the_encoder_streams_one_byte_per_output_sample() -> None:
    encoder = AlawEncoder(8000, 24000)
    data = encoder.encode(np.zeros(24000, dtype=np.float32)) + encoder.finish()
    assert abs(len(data) - 8000) <= 32
    assert encoder.content_type == "audio/x-alaw-basic"
