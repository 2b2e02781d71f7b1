"""A silent listener's first piece vocoded window by window: handed over part by part."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Generator
from typing import Any

import numpy as np
import pytest
from tests.replaying import ReplayingEngine

from voicestream.bench.texts import LONE_SENTENCE
from voicestream.cpus import CPU_USE
from voicestream.engine import KokoroEngine
from voicestream.engine.vocoder import FIRST_WINDOW_S
from voicestream.speech.job import JobState, Listener, SynthesisJob
from voicestream.speech.policy import Lane
from voicestream.speech.scheduler import SynthesisScheduler, _Order, _Part


async def test_the_first_piece_goes_out_window_by_window_with_its_words(windowed_replays: ReplayingEngine) -> None:
    windowed = windowed_replays  # the parts' order and words are the point, not the render
    scheduler = SynthesisScheduler(windowed, workers=2)  # type: ignore[arg-type]
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
    # no other listener: nothing displaces the first piece; the second, yielding (its listener
    # has the first in hand), moves up at a part if its listener's slack runs out first
    assert scheduler.moved_pieces <= 1


async def test_a_windowed_piece_leaves_its_urgent_worker_to_a_listener_with_less_slack(windowed: KokoroEngine) -> None:
    """One worker per lane. The first listener's first piece renders window by window on the
    urgent worker; a second listener asks while it renders, its short piece the policy's
    better choice (both are silent: the shorter render ends a silence sooner). After a part,
    the worker leaves the rest of the first piece, which a yielding worker (one thread)
    goes on with, and takes the second's piece. The first's audio is the windowed render's,
    part for part, whatever worker made each part."""
    scheduler = SynthesisScheduler(windowed, workers=1)
    scheduler.start()
    try:
        first = scheduler.submit(SynthesisJob(LONE_SENTENCE, "af_heart", 1.0, Listener(), word_timestamps=True))
        async with asyncio.timeout(60):
            while not first.rendering:  # the urgent worker has it: its front and first window take long
                await asyncio.sleep(0)
            second = scheduler.submit(SynthesisJob("Hello there.", "af_heart", 1.0, Listener()))
            first_chunks, second_chunks = await asyncio.gather(_chunks(first), _chunks(second))
    finally:
        await scheduler.stop()
    assert scheduler.moved_pieces >= 1
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


def test_a_piece_left_after_any_part_is_finished_by_the_next_worker(windowed_replays: ReplayingEngine) -> None:
    """Whichever part a worker leaves a windowed piece after, the next worker renders the
    rest: the parts' lengths are the windowed render's, none lost. The scheduler's render
    steps are called directly, the loop's decision stood for by setting the order's
    ``leave`` after the chosen part (a leave after the second part once lost the rest). The
    piece is rendered once and replayed for every leave: what is tested is the hand-over."""
    windowed = windowed_replays
    piece = next(windowed.plan(LONE_SENTENCE, cut_first_clause=True))
    expected = [p.audio.size / windowed.sample_rate for p in windowed.render_parts(piece, "af_heart", 1.0, 2) if p.audio.size]
    assert piece.windowed and len(expected) >= 3
    for leave_after in range(1, len(expected)):
        assert _left_after(windowed, leave_after) == expected, leave_after  # type: ignore[arg-type]


def _left_after(engine: KokoroEngine, leave_after: int) -> list[float]:
    """The seconds of each part of LONE_SENTENCE's first piece, its urgent worker told to
    leave after part ``leave_after``, a yielding worker rendering the rest."""
    scheduler = SynthesisScheduler(engine, workers=1)
    job = SynthesisJob(LONE_SENTENCE, "af_heart", 1.0, Listener())
    job.pieces = engine.plan(LONE_SENTENCE, cut_first_clause=True)
    urgent = _Order(job, Lane.URGENT, windowed=True, silent=True)
    seconds: list[float] = []

    def hand_over(part: _Part) -> None:
        seconds.append(part.seconds)
        if len(seconds) >= leave_after:
            urgent.leave.set()

    assert scheduler._render_next(urgent, hand_over) and job.unfinished is not None
    assert not scheduler._render_next(_Order(job, Lane.YIELDING, windowed=True, silent=False), hand_over)
    assert job.unfinished is None
    return [s for s in seconds if s]

async def _chunks(job: SynthesisJob) -> list:
    return [chunk async for chunk in job.audio()]


class _SendRecorder:
    """The real engine, recording the threads each piece starts on and what the scheduler
    sends into its parts (a thread count for the windows after a part, or None: go on as before)."""

    def __init__(self, engine: KokoroEngine, made: list[str] | None = None) -> None:
        self._engine = engine
        self.sent: list[int | None] = []
        self.started_on: list[int] = []
        self.made = made
        """Given: ``"made"`` is appended as each part is made."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def render_parts(self, *args: Any, **kwargs: Any) -> Generator[Any, int | None, None]:
        self.started_on.append(args[3] if len(args) > 3 else kwargs.get("threads", 1))
        parts = self._engine.render_parts(*args, **kwargs)
        sent: int | None = None
        while True:
            try:
                part = parts.send(sent)
            except StopIteration:
                return
            if self.made is not None:
                self.made.append("made")
            sent = yield part
            self.sent.append(sent)


def test_a_first_audio_run_goes_on_with_one_thread_once_other_first_audio_claims_cores(windowed: KokoroEngine) -> None:
    """A silent listener's first piece on every core. When another listener's first audio
    claims cores while it renders, its windows after that part run on one thread: two runs
    on every core fight over the cores and leave both listeners silent (two long answers
    asked at once: 440-580 ms of silence for the worse listener, 30-130 ms once narrowed;
    docs/BENCHMARKS.md). Alone, it keeps every core. The other claim is taken in the first
    part's hand-over, so nothing here races the machine."""
    if windowed.max_threads < 2:
        pytest.skip("one core: every run is single-threaded")
    recorder = _SendRecorder(windowed)
    scheduler = SynthesisScheduler(recorder, workers=1)  # type: ignore[arg-type]

    def sent_into_first_piece(other_first_audio: bool) -> list[int | None]:
        job = SynthesisJob(LONE_SENTENCE, "af_heart", 1.0, Listener())
        job.pieces = windowed.plan(LONE_SENTENCE, cut_first_clause=True)
        recorder.sent.clear()
        claims: list[Any] = []

        def hand_over(part: _Part) -> None:
            if other_first_audio and not claims:
                claims.append(CPU_USE.claim_urgent(windowed.max_threads))
                claims[0].__enter__()

        try:
            assert not scheduler._render_next(_Order(job, Lane.URGENT, windowed=True, silent=True), hand_over)
        finally:
            for claim in claims:
                claim.__exit__(None, None, None)
        return list(recorder.sent)

    alone = sent_into_first_piece(other_first_audio=False)
    assert len(alone) >= 2 and set(alone) == {None}
    narrowed = sent_into_first_piece(other_first_audio=True)
    assert narrowed[0] == 1 and set(narrowed[1:]) == {None}, narrowed



@pytest.mark.parametrize(
    ("other_first_words", "one_thread_s", "held"),
    [(True, 10.0, True), (False, 10.0, False), (True, 1e-6, False), (True, None, True)],
    ids=["beside first words, slow thread: held", "alone: not held", "fast thread: not held",
         "no run measured yet: held"],
)
def test_a_silent_listeners_first_part_waits_for_its_second_beside_other_first_words(
    windowed_replays: ReplayingEngine, other_first_words: bool, one_thread_s: float | None, held: bool
) -> None:
    """`holds_start`: a silent listener's first piece made beside another listener's first
    words goes on with one thread; where one thread cannot render the second window with the
    first part's slack in hand (the pace is set, not measured), the first part is handed over
    only with the second, so that the listener does not fall silent after its first words
    (`bench transport`'s (b): 434-457 ms of silence each without the hold, 0-90 ms with it,
    docs/BENCHMARKS.md). Alone, or with a thread that keeps pace, each part goes at once.
    Nothing is lost either way, and nothing races the machine: the order of what is made
    and handed over is the assertion, so the piece is rendered once and replayed after. A
    server that has measured no run yet (just started) holds too: its pace is only a prior."""
    windowed = windowed_replays
    log: list[str] = []
    recorder = _SendRecorder(windowed, made=log)  # type: ignore[arg-type]
    scheduler = SynthesisScheduler(recorder, workers=1)  # type: ignore[arg-type]
    for threads in (1, windowed.max_threads) if one_thread_s is not None else ():
        scheduler.pace.record(1, 1.0, threads, one_thread_s)
    job = SynthesisJob(LONE_SENTENCE, "af_heart", 1.0, Listener())
    job.pieces = windowed.plan(LONE_SENTENCE, cut_first_clause=True)
    seconds: list[float] = []

    def hand_over(part: _Part) -> None:
        log.append("sent")
        seconds.append(part.seconds)

    beside = CPU_USE.claim_urgent(windowed.max_threads, pause_background=False, owner="another listener")
    with beside if other_first_words else contextlib.nullcontext():
        assert not scheduler._render_next(_Order(job, Lane.URGENT, windowed=True, silent=True), hand_over)
    piece = next(windowed.plan(LONE_SENTENCE, cut_first_clause=True))
    expected = [p.audio.size / windowed.sample_rate for p in windowed.render_parts(piece, "af_heart", 1.0, 1)]
    assert [s for s in seconds if s] == [s for s in expected if s] and len(expected) >= 3  # nothing lost
    start = ["made", "made", "sent", "sent", "made", "sent"] if held else ["made", "sent", "made", "sent", "made", "sent"]
    assert log[:6] == start, log


@pytest.mark.parametrize("one_thread_s", [10.0, 1e-6], ids=["urgent", "in hand: yields"])
async def test_a_playing_listeners_piece_is_windowed_whatever_its_slack(
    windowed_replays: ReplayingEngine, one_thread_s: float
) -> None:
    """A listener 30 s from the end of its audio (so not silent: no first-clause cut, no
    windows from the plan). A piece its one thread would not render in time is urgent and
    claims every core, as a silent listener's does (on one ranked thread, a second sentence
    rendered slower than it played beside its own listener's render ahead: "How several
    listeners are scheduled" in docs/BENCHMARKS.md); one with slack in hand yields on one thread. Both go window by window
    (several chunks), so that an urgent one's first part comes before the listener runs dry
    and a yielding one can move up at a part. The pace (seconds a phoneme) is set, not
    measured, and 30 s is far from any render time: nothing here races the machine."""
    windowed = windowed_replays  # the threads each piece starts on are the point, not the render
    recorder = _SendRecorder(windowed)  # type: ignore[arg-type]
    scheduler = SynthesisScheduler(recorder, workers=2)  # type: ignore[arg-type]
    for threads in (1, windowed.max_threads):
        scheduler.pace.record(1, 1.0, threads, one_thread_s)
    listener = Listener()
    listener.buffered(30.0)
    scheduler.start()
    try:
        job = scheduler.submit(SynthesisJob(LONE_SENTENCE, "af_heart", 1.0, listener))
        async with asyncio.timeout(60):
            spoken = [chunk.seconds async for chunk in job.audio() if chunk.seconds]
    finally:
        await scheduler.stop()
    assert len(spoken) > 1, spoken
    assert recorder.started_on == [windowed.max_threads if one_thread_s > 1 else 1], recorder.started_on
    pieces = list(windowed.plan(LONE_SENTENCE, cut_first_clause=False))
    assert len(pieces) == 1 and not pieces[0].windowed  # one piece, whole by the plan


@pytest.mark.parametrize(
    ("silent", "claims", "threads"),
    [(True, True, None), (False, True, None), (False, False, 1), (True, False, 1)],
    ids=["silent: claims", "urgent need: claims", "playing, in hand: ranked", "unmarked: ranked"],
)
def test_an_urgent_listeners_run_on_a_yielding_worker_claims_the_cores(
    windowed_replays: ReplayingEngine, silent: bool, claims: bool, threads: int | None
) -> None:
    """No urgent worker was free (two answers began at once before this third): the policy
    places its run on a yielding worker and marks the urgent need (`Start.claims`; a silent
    listener's need is always urgent, as test_policy's three-answers test shows). Its listener
    has too little audio to wait on, so the run claims every core as first words do instead of
    waiting up to a second at each part while the urgent runs go (`bench transport`'s three
    sessions: the third's parts came a second apart). A listener with slack in hand rendering
    there stays ranked, on one thread; whether a listener is silent is the policy's to weigh,
    once, not the worker's again ("unmarked")."""
    windowed = windowed_replays
    recorder = _SendRecorder(windowed)  # type: ignore[arg-type]
    scheduler = SynthesisScheduler(recorder, workers=1)  # type: ignore[arg-type]
    job = SynthesisJob(LONE_SENTENCE, "af_heart", 1.0, Listener())
    job.pieces = windowed.plan(LONE_SENTENCE, cut_first_clause=True)
    order = _Order(job, Lane.YIELDING, windowed=True, silent=silent, claims=claims)
    assert not scheduler._render_next(order, lambda part: None)
    assert recorder.started_on == [threads or windowed.max_threads]
