"""`bench transport` and `bench load` run end to end on tiny inputs against real servers.

They check the tables' shape and the relations that hold at any speed, not the figures: so
their servers take the session's replaying engine (tests/replaying.py), the real model's
audio with each piece rendered once in the session."""

from __future__ import annotations

import pytest
from tests.replaying import ReplayingEngine

from voicestream.bench.load import measure_load
from voicestream.bench.transport import (
    PCM16_BYTES_PER_S,
    SpokenMessages,
    TransportTexts,
    chunk_answer,
    made_per_s,
    measure_transport,
    silence_floor_s,
)

TINY = TransportTexts(
    first_sentence="Hi there.",
    block="Hi there. See you soon.",
    answer="When it rains after lunch on a Monday, we stay inside. Then we read.",
    monologue="Chapter one. The river runs on.",
    long_answer="The river runs on. It passes the mill.",
)


def test_latency_mode_cuts_the_first_chunk_early_and_sentence_mode_does_not() -> None:
    latency, sentences = chunk_answer(TINY.answer, True), chunk_answer(TINY.answer, False)
    assert len(latency[0].split()) < len(sentences[0].split())
    assert " ".join(latency) == " ".join(sentences) == TINY.answer


def test_transport_bench_runs_on_tiny_inputs(replaying_engine: ReplayingEngine) -> None:
    report = measure_transport(replaying_engine, trials=1, texts=TINY)  # type: ignore[arg-type]

    ttfa, pipeline, latency, sentences, contention, faces, at_once = report.tables
    assert all(0 < ms < 30_000 for ms in ttfa.column("mean ms"))
    heard = ttfa.column("first sound median ms")[:2]  # a player starting at the first byte sounds after it
    assert all(sound >= first for sound, first in zip(heard, ttfa.column("min ms"), strict=False))
    assert all(sound >= first for sound, first in zip(pipeline.column("first sound ms"), pipeline.column("first audio ms")))
    assert pipeline.column("session") == ["pipelined (voicestream)", "sequential (reference design)"]
    assert all(first <= last for first, last in zip(pipeline.column("first audio ms"), pipeline.column("last byte ms")))
    assert latency.column("chunks")[0] > latency.column("chunks")[1]
    assert all(wer < 50 for wer in latency.column("WER %"))
    assert sentences.column("voicestream bytes")[0] > 0
    assert len(contention.rows) == 2 and len(report.charts) == 3
    assert faces.column("face") == ["session", "Cartesia", "ElevenLabs", "Deepgram"]
    assert all(ms > 0 for ms in faces.column("first audio ms")) and all(s > 0.5 for s in faces.column("speech s"))
    assert faces.column("audio B per s")[0] == faces.column("audio B per s")[3] == pytest.approx(48_000)  # raw pcm16
    base64_json = faces.column("messages B per s")[1]  # Cartesia: the same audio as base64 in JSON
    assert base64_json > 4 / 3 * 48_000 and all(wire > 0 for wire in faces.column("on the wire B per s"))
    assert at_once.column("sessions") == [2, 3] and all(seconds > 0 for seconds in at_once.column("answer s"))
    columns = ("answer s", "sessions", "audio made s per s", "first audio ms (latest)", "silent ms floor (the last to end)")
    for answer_s, sessions, pace, first_ms, floor_ms in zip(*map(at_once.column, columns), strict=True):
        assert pace > 0 and floor_ms == pytest.approx(1000 * silence_floor_s(answer_s, sessions, pace, first_ms / 1000))


def test_the_pace_sets_the_last_listeners_least_silence() -> None:
    """Stop 44's held-out figures: two one-thread renders made 1.71 s of audio a second for
    two listeners of 26.4 s answers, who play 2.00: the last byte comes after 30.9 s, so the
    listener it belongs to, its first audio at 0.9 s, is silent at least 3.6 s."""
    assert silence_floor_s(26.4, 2, 1.71, 0.9) == pytest.approx(3.577, abs=0.001)
    assert silence_floor_s(26.4, 2, 2.63, 0.9) == 0.0  # faster than the listeners: no floor
    assert silence_floor_s(10.0, 3, 2.0, 1.0) == pytest.approx(4.0)
    finished = SpokenMessages(done_s=4.0, pcm16=bytes(int(2 * PCM16_BYTES_PER_S)))
    assert made_per_s([finished, SpokenMessages(done_s=5.0, pcm16=bytes(int(3 * PCM16_BYTES_PER_S)))]) == pytest.approx(1.0)


def test_load_bench_counts_requests_and_busy_answers(replaying_engine: ReplayingEngine) -> None:
    report = measure_load(  # type: ignore[arg-type]
        replaying_engine, ladder=(1, 2), rounds=1, text="Hi there. Bye now.", max_sessions=1
    )

    table = report.tables[0]
    assert table.column("sessions") == [1, 2]
    assert table.column("requests") == [1, 1]
    assert table.column("busy") == [0, 1]
    assert table.column("errors") == [0, 0]
    assert table.column("p50 first sound ms")[0] >= table.column("p50 first audio ms")[0] > 0
    assert table.column(table.columns[-1])[1] is False  # a busy answer fails the step
    assert report.context["capacity_sessions"] in (0, 1)  # 1 only where one session's p95 met the target
