"""The first audible sound: -40 dBFS over 20 ms windows, absolute, and when a player plays it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicestream.audio import FirstSound, first_audible_sample, heard_at_s

RATE = 24_000
WINDOW = 480  # 20 ms


def _tone(samples: int, amplitude: float) -> np.ndarray:
    return (amplitude * np.sin(2 * np.pi * 220 * np.arange(samples) / RATE)).astype(np.float32)


def test_the_first_window_at_minus_40_dbfs_is_found_after_leading_silence() -> None:
    audio = np.concatenate([np.zeros(7_000, np.float32), _tone(4_800, 0.5)])
    offset = first_audible_sample(audio, RATE)
    # RMS 0.01 (-40 dBFS) needs 1/1250 of the window's energy: the window starts just before the tone.
    assert offset is not None and 7_000 - WINDOW < offset <= 7_000


def test_the_threshold_is_full_scale_not_the_clips_peak() -> None:
    quiet = _tone(4_800, 0.01)  # RMS 0.0071: -43 dBFS, inaudible however loud it is relative to itself
    assert first_audible_sample(quiet, RATE) is None
    just_audible = _tone(4_800, 0.0145)  # RMS 0.0103: -39.8 dBFS
    assert first_audible_sample(just_audible, RATE) == 0


def test_silence_and_audio_shorter_than_a_window_are_not_audible() -> None:
    assert first_audible_sample(np.zeros(RATE, np.float32), RATE) is None
    assert first_audible_sample(np.ones(WINDOW - 1, np.float32), RATE) is None
    assert first_audible_sample(np.ones(WINDOW, np.float32), RATE) == 0


@given(st.integers(0, 20_000), st.floats(0.02, 1.0))
def test_a_tone_after_any_silence_is_heard_within_one_window_of_its_start(silence: int, amplitude: float) -> None:
    audio = np.concatenate([np.zeros(silence, np.float32), np.full(2 * WINDOW, amplitude, np.float32)])
    offset = first_audible_sample(audio, RATE)
    assert offset is not None and silence - WINDOW < offset <= silence


def test_a_player_hears_a_sample_at_the_first_arrival_plus_its_position_when_nothing_is_late() -> None:
    chunks = [(0.5, RATE), (0.9, RATE)]  # the second second arrives before the first has played
    assert heard_at_s(chunks, RATE // 4, RATE) == pytest.approx(0.75)
    assert heard_at_s(chunks, RATE + RATE // 2, RATE) == pytest.approx(2.0)


def test_a_late_chunk_stalls_the_player_until_it_arrives() -> None:
    chunks = [(0.5, RATE // 10), (2.0, RATE)]  # 100 ms of audio, then a 1.4 s underrun
    assert heard_at_s(chunks, RATE // 10 + RATE // 2, RATE) == pytest.approx(2.5)
    with pytest.raises(ValueError):
        heard_at_s(chunks, RATE + RATE // 10, RATE)


def test_first_sound_across_chunks_counts_the_silence_from_the_first_byte() -> None:
    sound = FirstSound(RATE)
    assert sound.feed(0.3, np.zeros(RATE // 4, np.float32)) is None  # 250 ms of silence first
    heard = sound.feed(0.4, _tone(RATE // 2, 0.3))
    assert sound.first_audio_s == 0.3
    assert sound.silence_s is not None and 0.23 < sound.silence_s <= 0.25
    assert heard == pytest.approx(0.3 + sound.silence_s)
    assert sound.feed(5.0, _tone(RATE, 0.3)) == heard
