"""Streamed WAV: an open-ended header players accept, and exact sizes for files."""

import io
import struct

import av
import numpy as np
import pytest
from tests.audio.audio_signals import DURATION_S, tone, uneven_chunks

from voicestream.audio import AudioError, create_encoder, decode_audio, finalize_wav, wav_header
from voicestream.audio.pcm import pcm16_to_float

SIGNAL = tone(DURATION_S)


def streamed_wav(sample_rate: int = 24000) -> bytes:
    encoder = create_encoder("wav", sample_rate)
    return b"".join(encoder.encode(chunk) for chunk in uneven_chunks(SIGNAL)) + encoder.finish()


def test_stream_starts_with_an_open_ended_pcm16_header() -> None:
    header = streamed_wav(16000)[:44]
    riff, riff_size, wave = struct.unpack("<4sI4s", header[:12])
    fmt, fmt_size, codec, channels, rate, byte_rate, align, bits = struct.unpack(
        "<4sIHHIIHH", header[12:36]
    )
    data, data_size = struct.unpack("<4sI", header[36:44])
    assert (riff, wave, fmt, data) == (b"RIFF", b"WAVE", b"fmt ", b"data")
    assert riff_size == data_size == 0xFFFFFFFF
    assert (fmt_size, codec, channels, rate, byte_rate, align, bits) == (
        16,
        1,
        1,
        16000,
        32000,
        2,
        16,
    )


def test_header_comes_with_the_first_bytes_only() -> None:
    encoder = create_encoder("wav")
    first = encoder.encode(SIGNAL[:100])
    second = encoder.encode(SIGNAL[100:200])
    assert first[:4] == b"RIFF" and len(first) == 44 + 200
    assert len(second) == 200
    assert encoder.finish() == b""


def test_empty_stream_is_still_a_wav() -> None:
    assert create_encoder("wav").finish() == wav_header(24000)


@pytest.mark.parametrize("cut", [44, 46, 1001, 20_000, 31_337])
def test_truncated_stream_opens_and_decodes(cut: int) -> None:
    """A client that stops reading mid-stream (even mid-sample) still has a playable WAV."""
    stream = streamed_wav()
    with av.open(io.BytesIO(stream[:cut]), mode="r", format="wav") as container:
        audio = container.streams.audio[0]
        assert (audio.codec_context.name, audio.rate, audio.channels) == ("pcm_s16le", 24000, 1)
        frames = [frame.to_ndarray().reshape(-1) for frame in container.decode(audio)]
    decoded = np.concatenate([np.zeros(0, np.int16), *frames])
    whole_samples = (cut - 44) // 2
    assert len(decoded) == whole_samples
    assert np.array_equal(decoded, np.frombuffer(stream[44 : 44 + 2 * whole_samples], "<i2"))


def test_finalize_wav_writes_the_exact_sizes() -> None:
    stream = streamed_wav()
    finished = finalize_wav(stream)
    data_size = len(stream) - 44
    assert struct.unpack("<I", finished[4:8])[0] == len(stream) - 8
    assert struct.unpack("<I", finished[40:44])[0] == data_size
    assert finished[44:] == stream[44:] and finished[8:40] == stream[8:40]
    decoded, rate = decode_audio(finished, "wav")
    assert rate == 24000
    assert np.array_equal(decoded, pcm16_to_float(stream[44:]))


def test_header_with_known_size_matches_a_finalized_stream() -> None:
    pcm = b"\x01\x00" * 480
    assert wav_header(24000, data_bytes=len(pcm)) + pcm == finalize_wav(wav_header(24000) + pcm)


@pytest.mark.parametrize("data", [b"", b"RIFF" + b"\x00" * 60, b"ID3\x04" + b"\x00" * 60])
def test_finalize_wav_refuses_what_is_not_our_stream(data: bytes) -> None:
    with pytest.raises(AudioError):
        finalize_wav(data)
