"""The scheduler's budgets, on the real engine with consumers that stop reading: what a
listener may hold is decided by the scheduler's own accounting, never by how fast this
machine renders or how much a socket buffer absorbs. The tests that render whole answers take
the session's replaying engine (tests/replaying.py): the real model's audio, each piece rendered
once; what they check is the accounting around it."""

from __future__ import annotations

import asyncio

from tests.replaying import ReplayingEngine

from voicestream.engine import KokoroEngine
from voicestream.speech.scheduler import (
    Budgets,
    BusyError,
    JobState,
    Listener,
    SynthesisJob,
    SynthesisScheduler,
)

SENTENCES = " ".join(f"Sentence {n} is one more piece of a long answer." for n in range(1, 4))


async def _parked(scheduler: SynthesisScheduler, timeout: float = 120) -> None:
    """Wait until nothing renders and nothing may (a deterministic state, however fast)."""
    async with asyncio.timeout(timeout):
        while not scheduler.parked:
            await asyncio.sleep(0.05)


async def _drain(job: SynthesisJob) -> list[bytes]:
    async with asyncio.timeout(120):
        return [chunk.data async for chunk in job.audio()]


async def test_a_listener_that_takes_nothing_holds_one_share_plus_a_piece_per_worker(
    replaying_engine: ReplayingEngine,
) -> None:
    """Three long requests nobody consumes: the scheduler parks them once their listener
    holds its share; what it holds is at most the share plus one piece per worker (pieces
    that started before the share was reached), and the rest is rendered only as the
    consumer takes audio."""
    share = 60_000  # about 1.2 s of pcm16: less than a sentence
    scheduler = SynthesisScheduler(replaying_engine, Budgets(listener_budget_bytes=share))  # type: ignore[arg-type]
    scheduler.start()
    try:
        listener = Listener()
        jobs = [scheduler.submit(SynthesisJob(SENTENCES, "af_heart", 1.0, listener)) for _ in range(3)]
        await _parked(scheduler)
        held = listener.held_bytes
        assert 0 < held
        assert scheduler.depth == 3 and all(not job.rendered_all for job in jobs)
        chunks = [data for job in jobs for data in await _drain(job)]
        largest = max(len(data) for data in chunks)
        assert held <= share + scheduler.workers * 2 * largest
        assert scheduler.peak_listener_bytes <= share + scheduler.workers * 2 * largest
        assert sum(map(len, chunks)) > 3 * share  # the whole text was spoken once consumed
        assert [job.state for job in jobs] == [JobState.DONE] * 3
        assert scheduler.depth == 0 and listener.held_bytes == 0
    finally:
        await scheduler.stop()


async def test_a_listener_that_reads_is_served_beside_many_that_do_not(replaying_engine: ReplayingEngine) -> None:
    """Six listeners hold audio nobody takes and the server-wide budget is spent; a
    seventh that reads still gets its request rendered to the end (a listener holding
    nothing may always render its next piece)."""
    budgets = Budgets(listener_budget_bytes=50_000, buffer_budget_bytes=100_000)
    scheduler = SynthesisScheduler(replaying_engine, budgets)  # type: ignore[arg-type]
    scheduler.start()
    try:
        stalled = [Listener() for _ in range(6)]
        for listener in stalled:
            scheduler.submit(SynthesisJob("Hold this. And that.", "af_heart", 1.0, listener))
        await _parked(scheduler)
        assert scheduler.held_bytes >= 100_000 and all(listener.held_bytes for listener in stalled)
        reader = scheduler.submit(SynthesisJob("I still get mine. All of it.", "af_heart", 1.0, Listener()))
        assert b"".join(await _drain(reader))
        assert reader.state is JobState.DONE
    finally:
        await scheduler.stop()


async def test_each_session_keeps_its_reserve_of_queue_slots(engine: KokoroEngine) -> None:
    """Listeners that queue as much as they may cannot take a newcomer's reserve (so the
    queue holds at most ``max_queue`` plus the reserves of sessions opened after it filled)."""
    scheduler = SynthesisScheduler(engine, Budgets(max_queue=12, max_sessions=3))
    reserve = scheduler.budgets.reserved_per_session
    greedy = [Listener(reserved_slots=reserve) for _ in range(2)]
    scheduler.reserved_slots = 2 * reserve
    taken = 0
    for listener in greedy:
        while True:
            try:
                scheduler.submit(SynthesisJob("Greedy.", "af_heart", 1.0, listener))
            except BusyError:
                break
            taken += 1
    assert taken == 12  # the greedy ones filled the shared slots and their own reserves
    newcomer = Listener(reserved_slots=reserve)
    scheduler.reserved_slots += reserve
    for _ in range(reserve):
        scheduler.submit(SynthesisJob("My turn.", "af_heart", 1.0, newcomer))
    try:
        scheduler.submit(SynthesisJob("One too many.", "af_heart", 1.0, newcomer))
    except BusyError:
        pass
    else:
        raise AssertionError("a newcomer took more than its reserve from a full queue")
    await scheduler.stop()


async def test_a_request_that_waits_too_long_on_the_servers_clock_is_stale(engine: KokoroEngine) -> None:
    scheduler = SynthesisScheduler(engine, Budgets(stale_after_s=0.0))
    scheduler.start()
    try:
        job = scheduler.submit(SynthesisJob("Too late.", "af_heart", 1.0, Listener()))
        try:
            await _drain(job)
        except Exception as error:  # noqa: BLE001 - the failure is what is checked
            assert getattr(error, "code", None) is not None and error.code.value == "request_stale"
        else:
            raise AssertionError("a request that waited past stale_after_s was spoken")
        assert job.state is JobState.FAILED and scheduler.depth == 0
    finally:
        await scheduler.stop()


async def test_a_consumer_that_stops_early_ends_its_request(engine: KokoroEngine) -> None:
    """However a route stops consuming (a client gone mid-answer), the request ends and
    frees its slot and bytes at once."""
    scheduler = SynthesisScheduler(engine)
    scheduler.start()
    try:
        listener = Listener()
        job = scheduler.submit(SynthesisJob(SENTENCES, "af_heart", 1.0, listener))
        async with asyncio.timeout(120):
            chunks = job.audio()
            await anext(chunks)
            await chunks.aclose()
        assert job.state is JobState.CANCELLED
        assert scheduler.depth == 0 and listener.held_bytes == 0
    finally:
        await scheduler.stop()
