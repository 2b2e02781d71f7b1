"""G.711 A-law (Deepgram's ``encoding=alaw``), checked against FFmpeg's decoder."""

import av
import numpy as np

from voicestream.audio.alaw import AlawEncoder, float_to_alaw


def _ffmpeg_decode(codes: bytes) -> np.ndarray:
    codec = av.CodecContext.create("pcm_alaw", "r")
    codec.sample_rate, codec.layout = 8000, "mono"
    return np.concatenate([frame.to_ndarray().ravel() for frame in codec.decode(av.Packet(codes))])


def test_every_level_ffmpeg_decodes_encodes_back_to_its_code() -> None:
    codes = bytes(range(256))
    levels = _ffmpeg_decode(codes).astype(np.float32) / 32768
    assert float_to_alaw(levels).tobytes() == codes


def test_a_sine_survives_within_half_of_the_coarsest_step() -> None:
    sine = (0.9 * np.sin(np.arange(8000) * 2 * np.pi * 440 / 8000)).astype(np.float32)
    decoded = _ffmpeg_decode(float_to_alaw(sine).tobytes()) / 32768
    assert np.abs(decoded - sine).max() <= 512 / 32768  # the top segment's step is 1024


def test_the_encoder_streams_one_byte_per_output_sample() -> None:
    encoder = AlawEncoder(8000, 24000)
    data = encoder.encode(np.zeros(24000, dtype=np.float32)) + encoder.finish()
    assert abs(len(data) - 8000) <= 32
    assert encoder.content_type == "audio/x-alaw-basic"
