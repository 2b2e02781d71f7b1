"""`compare` against the agent served on loopback, and the table it prints."""

from __future__ import annotations

import pytest
from tests.agent.agent_checks import PROMPT

from voicestream.agent.app import free_port
from voicestream.bench.compare import CompareError, ModeResult, Playback, compare, format_table


def result(
    mode: str, first_audio_ms: float, *, trial: int = 0, error: str | None = None
) -> ModeResult:
    return ModeResult(
        mode=mode,
        trial=trial,
        first_text_ms=100.0,
        first_audio_ms=first_audio_ms,
        total_ms=first_audio_ms + 2000,
        chunks=4,
        audio_s=6.5,
        agent_ttfa_ms=first_audio_ms - 10,
        first_sentence_ms=300.0,
        first_sentence_synthesis_s=0.25,
        error=error,
    )


def test_table_says_how_much_sooner_bidi_speaks():
    results = [
        result("bidi", 500.0),
        result("bidi", 700.0, trial=1),
        result("batch", 1200.0),
        result("batch", 1200.0, trial=1),
        result("batch-stream", 1000.0),
        result("batch-stream", 0.0, trial=1, error="speech_unavailable: down"),
    ]
    table = format_table(results)

    header, bidi, _, batch_stream = table.splitlines()[:4]
    assert header.split()[:4] == ["mode", "n", "first", "text"]
    assert bidi.split()[:4] == ["bidi", "2", "100", "600"]  # means over the trials
    assert batch_stream.split()[:2] == ["batch-stream", "1"]  # the failed trial is left out
    assert bidi.split()[-2:] == ["550", "40"]  # lower bound 300 + 250 ms, gap 590 - 550
    assert batch_stream.split()[-2:] == ["-", "-"]  # a bound for bidi only
    assert "bidi time to first audio is 2.0× faster than batch" in table
    assert "bidi time to first audio is 1.7× faster than batch-stream" in table
    assert "failed: batch-stream (trial 2): speech_unavailable: down" in table


def test_table_says_when_bidi_is_slower():
    table = format_table([result("bidi", 900.0), result("batch", 600.0)])

    assert "bidi time to first audio is 1.5× slower than batch" in table


async def test_compare_measures_each_mode_against_the_agent(agent_url):
    results = await compare(agent_url, PROMPT, modes=("bidi", "batch"), trials=1, warmup=False)

    assert [(r.mode, r.trial, r.error) for r in results] == [("bidi", 0, None), ("batch", 0, None)]
    for measured in results:
        assert 0 < measured.first_text_ms <= measured.first_audio_ms <= measured.total_ms
        assert measured.chunks > 0 and measured.audio_s > 0
        assert measured.agent_ttfa_ms is not None
    assert results[0].lower_bound_ms is not None and results[1].lower_bound_ms is None
    table = format_table(results)
    assert "bidi time to first audio is" in table and "than batch" in table


async def test_unreachable_agent_is_a_compare_error():
    with pytest.raises(CompareError, match="cannot reach the agent"):
        await compare(f"http://127.0.0.1:{free_port()}", PROMPT, modes=("bidi",), warmup=False)


def test_playback_counts_the_gaps_a_listener_hears():
    playback = Playback()
    playback.add(1000.0, 0.5)  # plays 1000-1500
    playback.add(1200.0, 0.5)  # queued: 1500-2000
    playback.add(2300.0, 1.0)  # 300 ms of silence, then 2300-3300
    playback.add(3300.0, 0.1)  # just in time
    assert (playback.stalls, playback.stalled_ms) == (1, 300.0)
    assert playback.ends_at_ms == pytest.approx(3400.0)
