"""A silent listener's first piece vocoded window by window: handed over part by part."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from voicestream.bench.texts import LONE_SENTENCE
from voicestream.engine import KokoroEngine
from voicestream.engine.vocoder import FIRST_WINDOW_S
from voicestream.server.job import JobState, Listener, SynthesisJob
from voicestream.server.scheduler import SynthesisScheduler


async def test_the_first_piece_goes_out_window_by_window_with_its_words(windowed: KokoroEngine) -> None:
    scheduler = SynthesisScheduler(windowed, workers=2)
    scheduler.start()
    try:
        job = scheduler.submit(SynthesisJob(LONE_SENTENCE, "af_heart", 1.0, Listener(), word_timestamps=True))
        async with asyncio.timeout(60):
            chunks = [chunk async for chunk in job.audio()]
    finally:
        await scheduler.stop()
    piece = next(windowed.plan(LONE_SENTENCE, words=True))
    parts = [part for part in windowed.render_parts(piece, "af_heart", 1.0, windowed.max_threads) if part.audio.size]
    spoken = [chunk for chunk in chunks if chunk.seconds][: len(parts)]  # the first piece's (the sentence has two)
    # one chunk per part, in order, the piece's words with the first but its last word, which
    # comes with the last part (timed from the request's start)
    assert [chunk.seconds for chunk in spoken] == [part.audio.size / windowed.sample_rate for part in parts]
    assert spoken[0].seconds <= FIRST_WINDOW_S + 0.27 and len(spoken) >= 3
    assert spoken[0].words and not any(chunk.words for chunk in spoken[1:-1]) and len(spoken[-1].words) == 1
    words = [w for chunk in spoken for w in chunk.words]
    assert [w.start_s for w in words] == pytest.approx([w.start_s for part in parts for w in part.words])
    assert words[-1].end_s <= sum(chunk.seconds for chunk in spoken) + 1e-9  # inside the audio (float sums aside)
    expected = (np.clip(np.concatenate([p.audio for p in parts]), -1.0, 1.0) * 32767).astype("<i2").tobytes()
    assert b"".join(chunk.data for chunk in chunks).startswith(expected)
    assert job.audio_seconds == pytest.approx(sum(chunk.seconds for chunk in chunks))
    assert scheduler.moved_pieces == 0  # no other listener waited: every window on the first-audio worker


async def test_a_windowed_first_piece_leaves_its_worker_to_a_listener_waiting_for_one(windowed: KokoroEngine) -> None:
    """One worker per lane; two listeners ask in the same loop turn. The first's first piece
    renders window by window on the first-audio worker while the second's waits for it; after
    the first part, the worker leaves the rest to the steady worker (on one thread) and takes
    the second's first piece. Deterministic: the second waits from before the first part is
    made until the worker is free. The first's audio is the windowed render's, part for part."""
    scheduler = SynthesisScheduler(windowed, workers=1)
    scheduler.start()
    try:
        first = scheduler.submit(SynthesisJob(LONE_SENTENCE, "af_heart", 1.0, Listener(), word_timestamps=True))
        second = scheduler.submit(SynthesisJob("Hello there.", "af_heart", 1.0, Listener()))
        async with asyncio.timeout(60):
            first_chunks, second_chunks = await asyncio.gather(_chunks(first), _chunks(second))
    finally:
        await scheduler.stop()
    assert scheduler.moved_pieces == 1
    piece = next(windowed.plan(LONE_SENTENCE, words=True))
    parts = [part for part in windowed.render_parts(piece, "af_heart", 1.0, windowed.max_threads) if part.audio.size]
    spoken = [chunk for chunk in first_chunks if chunk.seconds][: len(parts)]  # its first piece's
    assert [chunk.seconds for chunk in spoken] == [part.audio.size / windowed.sample_rate for part in parts]
    heard = np.frombuffer(b"".join(chunk.data for chunk in first_chunks), "<i2").astype(np.float32) / 32767
    made = np.clip(np.concatenate([part.audio for part in parts]), -1.0, 1.0)
    assert np.abs(heard[: made.size] - made).max() < 0.01  # the same windows, some on one thread
    words = [w for chunk in spoken for w in chunk.words]
    assert [w.start_s for w in words] == pytest.approx([w.start_s for part in parts for w in part.words], abs=1e-3)
    assert sum(chunk.seconds for chunk in second_chunks) == pytest.approx(second.audio_seconds) and second.audio_seconds > 0.5
    assert first.state is second.state is JobState.DONE


def test_a_piece_left_after_any_part_is_finished_by_the_next_worker(windowed: KokoroEngine) -> None:
    """Whichever part a first-audio worker leaves a windowed piece after, the next worker
    renders the rest: the parts' lengths are the windowed render's, none lost. The scheduler's
    render steps are called directly, the waiting listener stood for by setting the flag
    after the chosen part (a leave after the second part once lost the rest of the piece)."""
    piece = next(windowed.plan(LONE_SENTENCE, cut_first_clause=True))
    expected = [p.audio.size / windowed.sample_rate for p in windowed.render_parts(piece, "af_heart", 1.0, 2) if p.audio.size]
    assert piece.windowed and len(expected) >= 3
    for leave_after in range(1, len(expected)):
        assert _left_after(windowed, leave_after) == expected, leave_after


def _left_after(engine: KokoroEngine, leave_after: int) -> list[float]:
    """The seconds of each part of LONE_SENTENCE's first piece, its first-audio worker told
    after part ``leave_after`` that a listener waits, a steady worker rendering the rest."""
    scheduler = SynthesisScheduler(engine, workers=1)
    job = SynthesisJob(LONE_SENTENCE, "af_heart", 1.0, Listener())
    job.pieces = engine.plan(LONE_SENTENCE, cut_first_clause=True)
    seconds: list[float] = []

    def early(part: tuple) -> None:
        seconds.append(part[1])
        scheduler.first_audio_waiting = len(seconds) >= leave_after

    assert scheduler._render_next(job, True, early) is None and job.unfinished is not None
    last = scheduler._render_next(job, False, early)
    assert last is not None and job.unfinished is None
    return [*seconds, last[1]]

async def _chunks(job: SynthesisJob) -> list:
    return [chunk async for chunk in job.audio()]



@pytest.mark.parametrize(("render_s_per_phoneme", "expect_windows"), [(1e-6, False), (10.0, True)])
async def test_a_playing_listeners_piece_is_windowed_when_it_would_run_dry_first(
    windowed: KokoroEngine, render_s_per_phoneme: float, expect_windows: bool
) -> None:
    """A listener 30 s from the end of its audio (so not silent: no first-clause cut, no
    windows from the plan): a piece whose whole render the scheduler's pace predicts shorter
    than that renders whole (one chunk); one predicted longer is vocoded window by window
    (several), so that its first part comes before the listener runs dry. The pace is set,
    not measured, and 30 s is far from any render time: nothing here races the machine."""
    scheduler = SynthesisScheduler(windowed, workers=2)
    for threads in (1, windowed.max_threads):
        scheduler.pace.record(1, 1.0, threads, render_s_per_phoneme)
    listener = Listener()
    listener.buffered(30.0)
    scheduler.start()
    try:
        job = scheduler.submit(SynthesisJob(LONE_SENTENCE, "af_heart", 1.0, listener))
        async with asyncio.timeout(60):
            spoken = [chunk.seconds async for chunk in job.audio() if chunk.seconds]
    finally:
        await scheduler.stop()
    assert (len(spoken) > 1) is expect_windows, spoken
    pieces = list(windowed.plan(LONE_SENTENCE, cut_first_clause=False))
    assert len(pieces) == 1 and not pieces[0].windowed  # one piece, whole by the plan
