"""Decoding a recording stops at its duration limit: a small file of compressed silence
must not grow into gigabytes of samples before its length is checked."""

from __future__ import annotations

import io
import tracemalloc

import av
import numpy as np
import pytest

from voicestream.audio import RecordingTooLongError, decode_recording

RATE = 16_000
BLOCK = 16_384


def ogg_flac_silence(seconds: float) -> tuple[bytes, int]:
    """Ogg FLAC of `seconds` of silence (about 200 bytes a second), and its frame size."""
    data = io.BytesIO()
    with av.open(data, "w", format="ogg") as out:
        stream = out.add_stream("flac", rate=RATE, layout="mono")
        zeros = np.zeros((1, BLOCK), dtype=np.int16)
        for index in range(int(seconds * RATE / BLOCK)):
            frame = av.AudioFrame.from_ndarray(zeros, format="s16", layout="mono")
            frame.sample_rate, frame.pts = RATE, index * BLOCK
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
        frame_size = stream.codec_context.frame_size
    return data.getvalue(), frame_size


@pytest.fixture(scope="module")
def ten_minutes_of_silence() -> tuple[bytes, int]:
    return ogg_flac_silence(600)


def test_a_recording_past_the_limit_is_refused_after_one_frame_more(ten_minutes_of_silence) -> None:
    data, frame_size = ten_minutes_of_silence
    assert len(data) < 200_000  # 38 MB of float samples if it were decoded whole

    tracemalloc.start()
    try:
        with pytest.raises(RecordingTooLongError) as refused:
            decode_recording(data, "ogg", RATE, max_seconds=120)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    error = refused.value
    assert error.max_samples == 120 * RATE
    assert error.max_samples < error.decoded_samples <= error.max_samples + frame_size
    assert peak < 3 * 120 * RATE * 4  # the kept 120 s of float32, not the whole ten minutes
    assert "120 s" in str(error)


def test_a_recording_within_the_limit_decodes_whole() -> None:
    data, _ = ogg_flac_silence(5)
    samples = decode_recording(data, "ogg", RATE, max_seconds=6)
    assert abs(len(samples) - 5 * RATE) < BLOCK
