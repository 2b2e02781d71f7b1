"""Every format at every rate, decoded back by FFmpeg: duration, pitch, level, fidelity."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.audio.audio_signals import DURATION_S, TONE_HZ, dominant_frequency, tone, uneven_chunks

from voicestream.audio import (
    SUPPORTED_FORMATS,
    SUPPORTED_SAMPLE_RATES,
    AudioError,
    StreamEncoder,
    UnsupportedFormatError,
    UnsupportedSampleRateError,
    create_encoder,
    decode_audio,
    resample,
)

SIGNAL = tone(DURATION_S)
STREAMED_FORMATS = ("wav", "mp3", "aac", "opus", "flac")
OPUS_RATES = (8000, 12000, 16000, 24000, 48000)
RESAMPLER_SLACK = 2
"""Samples a stream resampler may gain or lose against the exact `n * out / in`."""


def encode_all(encoder: StreamEncoder, chunks: list[np.ndarray]) -> bytes:
    return b"".join(encoder.encode(chunk) for chunk in chunks) + encoder.finish()


def codec_extra_samples(format: str, rate: int) -> tuple[int, int]:
    """What a codec adds to the decoded length that its streamed container cannot trim.

    In samples at the encoded rate, as (at least, at most):
    - mp3: LAME's 576-sample delay (only a Xing/LAME header, written by seeking back at
      the end, could announce it), the last frame padded, and one more frame at flush.
    - aac: 1024 priming samples (no edit list in a fragmented stream), last frame padded.
    - opus: Ogg carries the pre-skip and the exact end, so nothing.
    - pcm16, wav, flac, mulaw: nothing.
    """
    if format == "mp3":
        frame = 1152 if rate >= 32000 else 576
        return 576, 576 + 2 * frame
    if format == "aac":
        return 1024, 1024 + 1024
    return 0, 0


@pytest.mark.parametrize("sample_rate", SUPPORTED_SAMPLE_RATES)
@pytest.mark.parametrize("format", SUPPORTED_FORMATS)
def test_round_trip_keeps_duration_pitch_and_level(format: str, sample_rate: int) -> None:
    encoder = create_encoder(format, sample_rate)
    decoded, decoded_rate = decode_audio(
        encode_all(encoder, uneven_chunks(SIGNAL)), format, sample_rate
    )

    if format == "opus":  # FFmpeg decodes Opus at 48 kHz whatever the stream was encoded at
        assert decoded_rate == 48000
        assert encoder.sample_rate == min(r for r in OPUS_RATES if r >= sample_rate)
    else:
        assert decoded_rate == encoder.sample_rate == sample_rate
    scale = decoded_rate / encoder.sample_rate
    least, most = codec_extra_samples(format, encoder.sample_rate)
    extra = len(decoded) - round(DURATION_S * decoded_rate)
    assert (least - RESAMPLER_SLACK) * scale <= extra <= (most + RESAMPLER_SLACK) * scale

    assert dominant_frequency(decoded, decoded_rate) == pytest.approx(TONE_HZ, abs=2)
    input_rms = np.sqrt(np.mean(SIGNAL**2))
    assert np.sqrt(np.mean(decoded**2)) > 0.75 * input_rms


@pytest.mark.parametrize("sample_rate", SUPPORTED_SAMPLE_RATES)
@pytest.mark.parametrize(
    ("format", "max_error"), [("pcm16", 1e-4), ("wav", 1e-4), ("flac", 1e-4), ("mulaw", 0.02)]
)
def test_sample_exact_formats_match_the_resampled_input(
    format: str, max_error: float, sample_rate: int
) -> None:
    """Lossless up to 16-bit rounding (mu-law: up to its step), chunked or not."""
    encoder = create_encoder(format, sample_rate)
    decoded, _ = decode_audio(encode_all(encoder, uneven_chunks(SIGNAL)), format, sample_rate)
    expected = resample(SIGNAL, 24000, sample_rate)
    assert len(decoded) == len(expected)
    assert np.max(np.abs(decoded - expected)) < max_error


@pytest.mark.parametrize("sample_rate", SUPPORTED_SAMPLE_RATES)
@pytest.mark.parametrize("format", STREAMED_FORMATS)
def test_audio_is_playable_before_finish(format: str, sample_rate: int) -> None:
    """After 1 s of input in 0.25 s chunks, most of it already decodes without `finish`.

    What is held back is the codec's lookahead and partial frame, plus the open MP4
    fragment or Ogg page (up to 0.5 s for AAC at 8 kHz, ~0.2 s for the rest).
    """
    encoder = create_encoder(format, sample_rate)
    quarter = SIGNAL[: 24000 // 4]
    early = b"".join(encoder.encode(quarter) for _ in range(4))
    decoded, decoded_rate = decode_audio(early, format, sample_rate)
    assert len(decoded) / decoded_rate >= 0.4
    decoded, decoded_rate = decode_audio(early + encoder.finish(), format, sample_rate)
    assert len(decoded) / decoded_rate >= 1.0


@settings(max_examples=5, deadline=None)
@given(
    sample_rate=st.sampled_from(SUPPORTED_SAMPLE_RATES),
    cuts=st.lists(st.integers(0, 9600), max_size=12),
)
@pytest.mark.parametrize("format", SUPPORTED_FORMATS)
def test_chunking_never_changes_the_stream(format: str, sample_rate: int, cuts: list[int]) -> None:
    signal = SIGNAL[:9600]
    whole = encode_all(create_encoder(format, sample_rate), [signal])
    chunked = encode_all(create_encoder(format, sample_rate), np.split(signal, sorted(cuts)))
    assert chunked == whole


@pytest.mark.parametrize(
    ("format", "content_type"),
    [
        ("pcm16", "audio/pcm"),
        ("wav", "audio/wav"),
        ("mp3", "audio/mpeg"),
        ("aac", "audio/mp4"),
        ("opus", "audio/ogg; codecs=opus"),
        ("flac", "audio/flac"),
        ("mulaw", "audio/basic"),
    ],
)
def test_encoders_describe_their_stream(format: str, content_type: str) -> None:
    encoder = create_encoder(format, 16000)
    assert (encoder.format, encoder.content_type, encoder.sample_rate) == (
        format,
        content_type,
        16000,
    )


@pytest.mark.parametrize("format", ["mp3", "aac", "opus"])
def test_bitrate_sets_the_size_of_lossy_streams(format: str) -> None:
    default = encode_all(create_encoder(format), uneven_chunks(SIGNAL))
    doubled = encode_all(create_encoder(format, bitrate=96_000), uneven_chunks(SIGNAL))
    assert len(doubled) > 1.5 * len(default)


@pytest.mark.parametrize(("format", "kbps"), [("mp3", 48), ("aac", 32), ("opus", 32)])
def test_default_bitrates_are_the_measured_speech_settings(format: str, kbps: int) -> None:
    """mp3 is constant; aac (plus ~4 kb/s of MP4 fragments) and opus are near the target."""
    rng = np.random.default_rng(7)
    seconds = 3
    t = np.arange(24000 * seconds) / 24000
    noisy = (0.3 * rng.standard_normal(len(t)) * np.abs(np.sin(2 * np.pi * 3 * t))).astype(
        np.float32
    )
    size = len(encode_all(create_encoder(format), np.array_split(noisy, 12)))
    assert size * 8 / seconds / 1000 == pytest.approx(kbps, rel=0.3)


@pytest.mark.parametrize("format", SUPPORTED_FORMATS)
def test_finish_ends_the_stream(format: str) -> None:
    encoder = create_encoder(format)
    encoder.encode(SIGNAL[:2400])
    encoder.finish()
    assert encoder.finish() == b""
    with pytest.raises(AudioError, match="finished"):
        encoder.encode(SIGNAL[:2400])


def test_out_of_range_and_nan_samples_are_clipped_and_silenced() -> None:
    encoder = create_encoder("pcm16")
    data = encoder.encode(np.array([2.0, -2.0, np.nan, np.inf, -np.inf], dtype=np.float32))
    assert np.frombuffer(data, "<i2").tolist() == [32767, -32768, 0, 32767, -32768]


def test_multichannel_input_is_refused() -> None:
    with pytest.raises(ValueError, match="1-D"):
        create_encoder("pcm16").encode(np.zeros((2, 100), dtype=np.float32))


def test_unknown_format_names_the_supported_ones() -> None:
    with pytest.raises(UnsupportedFormatError) as error:
        create_encoder("ogg")
    assert isinstance(error.value, AudioError)
    assert "'ogg'" in str(error.value)
    assert all(format in str(error.value) for format in SUPPORTED_FORMATS)


@pytest.mark.parametrize("sample_rate", [11025, 32000, 96000, 0])
def test_unsupported_sample_rate_names_the_supported_ones(sample_rate: int) -> None:
    with pytest.raises(UnsupportedSampleRateError) as error:
        create_encoder("mp3", sample_rate)
    assert isinstance(error.value, AudioError)
    assert str(sample_rate) in str(error.value)
    assert all(str(rate) in str(error.value) for rate in SUPPORTED_SAMPLE_RATES)


def test_decoding_refuses_unknown_formats_and_garbage() -> None:
    with pytest.raises(UnsupportedFormatError):
        decode_audio(b"", "ogg")
    with pytest.raises(AudioError, match="mp3"):
        decode_audio(b"not audio at all", "mp3")


def test_bitrate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="bitrate"):
        create_encoder("mp3", bitrate=0)


def test_a_bitrate_the_codec_refuses_is_an_audio_error() -> None:
    with pytest.raises(AudioError, match="opus encoder at 24000 Hz and 1 b/s"):
        create_encoder("opus", bitrate=1)
