"""`bench page` at its smallest: one question per start buffer on the real agent page, speech
server, local LLM and Chromium. Only what cannot race is asserted: every question was heard,
the page's figures come in their causal order, and the start buffer held the player back
until that much audio was queued (or the whole answer had come)."""

from __future__ import annotations

from voicestream.bench.page import measure_page
from voicestream.engine import KokoroEngine

LONG_BUFFER_MS = 3000
"""Longer than an answer's first audio chunk (a window of its first piece, or all of a
piece, about 1.7 s here), so that the
player must wait for later chunks or the end: a buffer below one chunk is always full at
once and would show nothing."""


def test_page_bench_hears_every_answer_and_holds_the_start_buffer(engine: KokoroEngine) -> None:
    report = measure_page(engine, (0, LONG_BUFFER_MS), trials=1, max_tokens=20, first_windows_ms=(500,))

    summary, each = report.to_report().tables
    assert summary.column("start buffer ms") == [0, LONG_BUFFER_MS]
    assert summary.column("first window ms") == [500, 500]
    assert summary.column("trials") == [1, 1]
    assert len(each.rows) == 2
    assert each.column("stalls by arrival") == [t.arrival_stalls for t in report.trials]
    for trial in report.trials:
        assert trial.error is None and not trial.stopped, trial
        assert trial.first_sound_ms is not None, trial
        assert trial.page_first_audio_ms is not None and trial.first_chunk_ms is not None, trial
        # the player reports its first sample after the chunk that carried it was pushed
        assert trial.page_first_audio_ms >= trial.first_chunk_ms - 1, trial
        assert trial.stalls is not None and trial.queued_at_start_s is not None, trial
        assert trial.arrival_stalls is not None, trial  # the page's chunks were logged as they came
        # the text an answer's audio is made of comes first, in the page and in the agent
        assert trial.first_text_ms is not None and trial.first_text_ms <= trial.first_chunk_ms, trial
        assert trial.agent_first_text_ms is not None and trial.agent_first_audio_ms is not None, trial
        assert trial.agent_first_text_ms <= trial.agent_first_audio_ms, trial
    unbuffered, buffered = report.trials
    assert unbuffered.queued_at_start_s > 0
    assert buffered.queued_at_start_s >= LONG_BUFFER_MS / 1000 or buffered.ended_at_start, buffered
    assert any("defaults (first window 500 ms, start buffer 0 ms)" in note for note in report.to_report().notes)
