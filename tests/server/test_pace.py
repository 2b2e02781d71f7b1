"""The scheduler's render pace: predictions from the runs so far, per thread count."""

from __future__ import annotations

import pytest

from voicestream.server.pace import PRIOR_S_PER_PHONEME, WEIGHT, RenderPace


def test_before_any_run_the_prior_predicts() -> None:
    assert RenderPace().predict(100, 1.0, 1) == pytest.approx(100 * PRIOR_S_PER_PHONEME)


def test_runs_move_the_estimate_of_their_own_thread_count_and_speed_shortens_it() -> None:
    pace = RenderPace()
    pace.record(100, 1.0, 2, 1.0)  # the first run sets it: 10 ms a phoneme
    assert pace.predict(50, 1.0, 2) == pytest.approx(0.5)
    assert pace.predict(50, 2.0, 2) == pytest.approx(0.25)  # twice the speed, half the frames
    assert pace.predict(50, 1.0, 1) == pytest.approx(50 * PRIOR_S_PER_PHONEME)  # another thread count
    pace.record(100, 1.0, 2, 2.0)  # 20 ms a phoneme: moves it by WEIGHT of the difference
    assert pace.predict(100, 1.0, 2) == pytest.approx(100 * (0.01 + WEIGHT * 0.01))


def test_empty_runs_are_ignored() -> None:
    pace = RenderPace()
    pace.record(0, 1.0, 1, 1.0)
    pace.record(10, 1.0, 1, 0.0)
    assert pace.predict(10, 1.0, 1) == pytest.approx(10 * PRIOR_S_PER_PHONEME)
