"""Chunked resampling is the one-shot conversion, cut anywhere."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.audio.audio_signals import tone

from voicestream.audio import SUPPORTED_SAMPLE_RATES, StreamResampler, resample

SIGNAL = tone(0.5)


@settings(max_examples=25, deadline=None)
@given(
    output_rate=st.sampled_from(SUPPORTED_SAMPLE_RATES),
    cuts=st.lists(st.integers(0, len(SIGNAL)), max_size=20),
)
def test_chunk_boundaries_leave_no_trace(output_rate: int, cuts: list[int]) -> None:
    resampler = StreamResampler(24000, output_rate)
    pieces = [resampler.process(chunk) for chunk in np.split(SIGNAL, sorted(cuts))]
    chunked = np.concatenate([*pieces, resampler.flush()])
    one_shot = resample(SIGNAL, 24000, output_rate)
    assert abs(len(chunked) - len(one_shot)) <= 2
    assert abs(len(chunked) - round(len(SIGNAL) * output_rate / 24000)) <= 2
    common = min(len(chunked), len(one_shot))
    assert np.max(np.abs(chunked[:common] - one_shot[:common])) < 1e-4


@pytest.mark.parametrize("input_rate", [22050, 44100, 16000])
def test_any_input_rate_reaches_the_output_rate(input_rate: int) -> None:
    signal = tone(0.5, input_rate)
    converted = resample(signal, input_rate, 24000)
    assert len(converted) == 12000
    assert converted.dtype == np.float32


def test_same_rate_passes_samples_through() -> None:
    resampler = StreamResampler(24000, 24000)
    assert resampler.process(SIGNAL) is SIGNAL
    assert len(resampler.flush()) == 0
