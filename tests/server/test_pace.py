"""The scheduler's render pace: predictions from the runs so far, per thread count."""

from __future__ import annotations

import pytest

from voicestream.speech.pace import (
    PRIOR_AUDIO_S_PER_PHONEME,
    PRIOR_S_PER_PHONEME,
    WEIGHT,
    RenderPace,
)


def test_before_any_run_the_prior_predicts() -> None:
    assert RenderPace().predict(100, 1.0, 1) == pytest.approx(100 * PRIOR_S_PER_PHONEME)


def test_runs_move_the_estimate_of_their_own_thread_count_and_speed_shortens_it() -> None:
    pace = RenderPace()
    pace.record(100, 1.0, 2, 1.0)  # the first run sets it: 10 ms a phoneme
    assert pace.predict(50, 1.0, 2) == pytest.approx(0.5)
    assert pace.predict(50, 2.0, 2) == pytest.approx(0.25)  # twice the speed, half the frames
    assert pace.predict(50, 1.0, 1) == pytest.approx(1.0)  # one thread, not run yet: as if two split the work evenly
    assert pace.predict(50, 1.0, 4) == pytest.approx(0.25)
    pace.record(100, 1.0, 2, 2.0)  # 20 ms a phoneme: moves it by WEIGHT of the difference
    assert pace.predict(100, 1.0, 2) == pytest.approx(100 * (0.01 + WEIGHT * 0.01))


def test_empty_runs_are_ignored() -> None:
    pace = RenderPace()
    pace.record(0, 1.0, 1, 1.0)
    pace.record(10, 1.0, 1, 0.0)
    assert pace.predict(10, 1.0, 1) == pytest.approx(10 * PRIOR_S_PER_PHONEME)


def test_the_render_of_a_second_of_audio_comes_from_the_audio_the_runs_made() -> None:
    """`render_per_audio`: seconds of rendering per second of audio, the thread count's rate
    over the audio a phoneme makes (its prior until a run says how much audio it made)."""
    pace = RenderPace()
    assert pace.table().render_per_audio(1) == pytest.approx(PRIOR_S_PER_PHONEME / PRIOR_AUDIO_S_PER_PHONEME)
    pace.record(100, 1.0, 1, 8.0)  # no audio given: the audio's prior stays
    assert pace.table().render_per_audio(1) == pytest.approx(0.08 / PRIOR_AUDIO_S_PER_PHONEME)
    pace.record(100, 2.0, 1, 4.0, audio_s=4.0)  # at speed 2: 80 ms a phoneme, 80 ms of audio a phoneme at speed 1
    assert pace.table().audio_per_phoneme == pytest.approx(0.08)
    assert pace.table().render_per_audio(1) == pytest.approx(1.0)  # one thread barely keeps pace
    assert pace.table().render_per_audio(2) == pytest.approx(0.5)  # two threads, not run yet
