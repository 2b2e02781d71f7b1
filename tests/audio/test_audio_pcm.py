"""float to pcm16 and mu-law, checked against FFmpeg's own codecs."""

import av
import numpy as np

from voicestream.audio import float_to_mulaw, float_to_pcm16, mulaw_to_float, pcm16_to_float

ALL_INT16 = np.arange(-32768, 32768, dtype=np.int32).astype(np.int16)


def ffmpeg_mulaw_decode(codes: bytes) -> np.ndarray:
    decoder = av.CodecContext.create("pcm_mulaw", "r")
    decoder.sample_rate, decoder.layout = 8000, "mono"
    return np.concatenate([f.to_ndarray().reshape(-1) for f in decoder.decode(av.Packet(codes))])


def test_pcm16_rounds_and_clips_like_ffmpeg() -> None:
    samples = np.array([0.0, 0.5, -0.5, 1.0, -1.0, 1.7, -1.7, 1.4 / 32768, 1.6 / 32768])
    expected = [0, 16384, -16384, 32767, -32768, 32767, -32768, 1, 2]
    assert float_to_pcm16(samples).tolist() == expected


def test_pcm16_round_trip_is_exact_for_every_value() -> None:
    as_float = pcm16_to_float(ALL_INT16.astype("<i2").tobytes())
    assert np.array_equal(float_to_pcm16(as_float), ALL_INT16)


def test_mulaw_decoding_matches_ffmpeg_for_every_code() -> None:
    codes = bytes(range(256))
    assert np.array_equal(float_to_pcm16(mulaw_to_float(codes)), ffmpeg_mulaw_decode(codes))


def test_mulaw_encoding_is_g711() -> None:
    """FFmpeg's encoder rounds a few boundary values the other way; never by more than a step."""
    ours = float_to_mulaw(pcm16_to_float(ALL_INT16.tobytes()))
    encoder = av.CodecContext.create("pcm_mulaw", "w")
    encoder.sample_rate, encoder.layout, encoder.format = 8000, "mono", "s16"
    frame = av.AudioFrame.from_ndarray(ALL_INT16[None], format="s16", layout="mono")
    frame.sample_rate = 8000
    theirs = np.frombuffer(b"".join(bytes(p) for p in encoder.encode(frame)), np.uint8)
    assert np.mean(ours == theirs) > 0.99
    our_error = np.abs(ffmpeg_mulaw_decode(ours.tobytes()).astype(int) - ALL_INT16)
    their_error = np.abs(ffmpeg_mulaw_decode(theirs.tobytes()).astype(int) - ALL_INT16)
    assert our_error.max() <= their_error.max()
    assert float_to_mulaw(np.array([0.0, 1.0, -1.0])).tolist() == [0xFF, 0x80, 0x00]
