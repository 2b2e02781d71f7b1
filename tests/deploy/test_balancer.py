"""A real load balancer in front of real replicas: Debian's haproxy (leastconn, health check
on /ping) and two `voicestream serve` processes on 127.0.0.1, as a Kubernetes Service or an
ingress would front the chart's pods. What it shows is what the chart's drain relies on:
sessions spread over the replicas, and a replica told to stop (SIGTERM) finishes the answer
it is speaking while the balancer takes it out and sends new sessions to the other.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.deploy.balancer import Haproxy, Replica, haproxy, replicas, wait_for

from voicestream.client import ResumePolicy, SpeechSession
from voicestream.client.events import AudioChunk, SpeechCompleted, SpeechFailed
from voicestream.edge.drain import exit_deadline_s
from voicestream.engine.weights import resolve_weights

SESSIONS = "voicestream_active_sessions"
REQUESTS = "voicestream_requests_total"
LONG_ANSWER = " ".join(f"Sentence {n} is spoken while the replica drains." for n in range(1, 4))


@pytest.fixture
def fleet(request: pytest.FixtureRequest, tmp_path: Path):
    """Replicas behind haproxy, from the test's `fleet` mark: how many (two by default) and
    their `--grace-s` (60 s by default)."""
    mark = request.node.get_closest_marker("fleet")
    count, grace_s = mark.args if mark else (2, 60)
    model_dir = resolve_weights().model_path.parent
    names = ["a", "b", "c"][:count]
    with replicas(names, model_dir, grace_s) as started, haproxy(started, tmp_path) as balancer:
        yield balancer, started


async def speak_once(session: SpeechSession, text: str) -> SpeechCompleted:
    request_id = await session.submit(text)
    async for event in session.events():
        assert not isinstance(event, SpeechFailed), event.error
        if isinstance(event, SpeechCompleted) and event.request_id == request_id:
            return event
    raise AssertionError("the session ended before the request was complete")


def ws(balancer: Haproxy) -> str:
    return balancer.url.replace("http://", "ws://")


def sessions_on(replica: Replica) -> float:
    return replica.metric(SESSIONS)


async def test_sessions_spread_and_a_draining_replica_finishes_while_new_sessions_go_elsewhere(
    fleet: tuple[Haproxy, list[Replica]],
) -> None:
    balancer, (a, b) = fleet

    # Four sessions through the balancer: leastconn puts two on each replica.
    opened = [await SpeechSession.connect(ws(balancer)) for _ in range(4)]
    for n, session in enumerate(opened):
        assert (await speak_once(session, f"Hello number {n}.")).audio_bytes > 0
    wait_for(lambda: (sessions_on(a), sessions_on(b)) == (2, 2), 20, "sessions did not spread two and two")
    assert (a.metric(REQUESTS), b.metric(REQUESTS)) == (2, 2)
    assert {name: row["scur"] for name, row in balancer.stats().items()} == {"a": "2", "b": "2"}
    for session in opened:
        await session.close()
    wait_for(lambda: sessions_on(a) + sessions_on(b) == 0, 20, "the closed sessions stayed open")

    # One session mid-answer on whichever replica took it; that replica is told to stop.
    speaking = await SpeechSession.connect(ws(balancer))
    request_id = await speaking.submit(LONG_ANSWER)
    events = speaking.events()
    async for event in events:
        if isinstance(event, AudioChunk):
            break
    wait_for(lambda: sessions_on(a) + sessions_on(b) == 1, 20, "the speaking session is not counted")
    draining, other = (a, b) if sessions_on(a) == 1 else (b, a)
    requests_before = other.metric(REQUESTS)
    draining.sigterm()

    # haproxy's health check sees /ping answer 503 and takes the replica out...
    wait_for(lambda: balancer.status(draining.name).startswith("DOWN"), 20, "haproxy kept the draining replica")
    assert balancer.status(other.name) == "UP"
    # ...so new sessions land on the other one, and are answered, not refused `busy`.
    newcomers = [await SpeechSession.connect(ws(balancer)) for _ in range(2)]
    for session in newcomers:
        assert (await speak_once(session, "A new session after the drain began.")).audio_bytes > 0
    assert sessions_on(other) == 2
    assert other.metric(REQUESTS) == requests_before + 2
    for session in newcomers:
        await session.close()

    # The answer being spoken when SIGTERM came is spoken to its end.
    async for event in events:
        assert not isinstance(event, SpeechFailed), event.error
        if isinstance(event, SpeechCompleted):
            assert event.request_id == request_id
            assert event.total_duration_s > 6  # all three sentences, not cut mid-answer
            break
    else:
        raise AssertionError("the in-flight answer did not complete")
    await speaking.close()
    # A drained server ends by the signal it caught (`voicestream.edge.drain.DrainingServer`).
    assert await asyncio.to_thread(draining.process.wait, 60) == -signal.SIGTERM
    assert balancer.stats()[draining.name]["status"].startswith("DOWN")


RESUMED = [f"Sentence {n} of a long answer that outlasts a one second grace period." for n in range(1, 5)]
"""Four requests, about 17 s of audio: far more than a replica renders in its one second of grace."""
CRASHED = [f"Sentence {n} is cut short." for n in range(1, 5)]
"""Four requests for the SIGKILL, which has no grace to outlast: what the replica left takes
render time on the replica the session resumes on, so the sentences are short."""


async def _speak_through_a_lost_replica(
    balancer: Haproxy, live: list[Replica], lose: Callable[[Replica], None], sentences: list[str],
) -> tuple[SpeechSession, list, Replica]:
    """``sentences`` as requests on one resuming session through the balancer; at the first
    audio the replica holding the session (one of ``live``) is lost (``lose``). Returns the
    session, its events and the lost replica."""
    events: list = []
    lost = None
    async with await SpeechSession.connect(ws(balancer), resume=ResumePolicy(attempts=8, backoff_s=0.25)) as session:
        for index, sentence in enumerate(sentences):
            await session.submit(sentence, request_id=f"r{index}")
        async for event in session.events():
            events.append(event)
            if isinstance(event, AudioChunk) and lost is None:
                wait_for(lambda: sum(map(sessions_on, live)) == 1, 20, "the session is not counted")
                lost = next(replica for replica in live if sessions_on(replica) == 1)
                lose(lost)
            if sum(isinstance(e, SpeechCompleted | SpeechFailed) for e in events) == len(sentences):
                break
    assert lost is not None
    return session, events, lost


def _each_request_completed_once_with_one_copy_of_its_audio(events: list, sentences: list[str]) -> None:
    assert not [e for e in events if isinstance(e, SpeechFailed)]
    completed = [e for e in events if isinstance(e, SpeechCompleted)]
    assert [e.request_id for e in completed] == [f"r{n}" for n in range(len(sentences))]
    for done in completed:
        received = sum(len(e.data) for e in events if isinstance(e, AudioChunk) and e.request_id == done.request_id)
        # what the first replica sent is not sent again: about one copy of each answer, not two
        assert received == pytest.approx(done.audio_bytes, abs=24_000 * 2 // 5)


def _requests_on(replicas: list[Replica]) -> float:
    return sum(replica.metric(REQUESTS) for replica in replicas)


@pytest.mark.fleet(3, 1)
async def test_a_session_on_a_lost_replica_resumes_through_the_balancer_and_loses_nothing(
    fleet: tuple[Haproxy, list[Replica]],
) -> None:
    """One fleet of three, `--grace-s 1`, two losses in turn, each mid-answer:

    SIGKILL (a crash): no drain, no close frame, the socket just breaks. The client reconnects
    through the balancer (whose health check has taken the dead replica out by then, or whose
    connect fails and is retried) and every request completes exactly once.

    SIGTERM (a drain) on one of the two left: the replica closes the session with 1001 while
    most of the answer is still to come; the client reconnects to the same address, which
    sends it to the last replica, and resends what it had not received. The drained process
    exits within its deadline (`voicestream.edge.drain.exit_deadline_s`; the pod's termination
    grace is sized to it, and a replica that outlived it would be killed mid-close)."""
    balancer, live = fleet[0], list(fleet[1])

    session, events, crashed = await _speak_through_a_lost_replica(balancer, live, Replica.sigkill, CRASHED)
    live.remove(crashed)
    assert session.resumes >= 1
    _each_request_completed_once_with_one_copy_of_its_audio(events, CRASHED)
    assert await asyncio.to_thread(crashed.process.wait, 10) == -signal.SIGKILL
    wait_for(lambda: balancer.status(crashed.name).startswith("DOWN"), 20, "haproxy kept the crashed replica")
    assert _requests_on(live) >= 1, "the resumed requests were answered by the replicas left"
    wait_for(lambda: sum(map(sessions_on, live)) == 0, 20, "the resumed session stayed open")

    exits: list[asyncio.Future[float]] = []

    def drain(replica: Replica) -> None:
        signalled = time.monotonic()
        replica.sigterm()
        exits.append(asyncio.ensure_future(asyncio.to_thread(lambda: replica.process.wait(60) and time.monotonic() - signalled)))

    answered = {replica.name: replica.metric(REQUESTS) for replica in live}
    session, events, draining = await _speak_through_a_lost_replica(balancer, live, drain, RESUMED)
    (other,) = (replica for replica in live if replica is not draining)
    # once at least: a reconnect that haproxy sends to the draining replica before its health
    # check takes it out is refused there (1013) and tried again
    assert session.resumes >= 1
    _each_request_completed_once_with_one_copy_of_its_audio(events, RESUMED)
    assert draining.process.wait(60) == -signal.SIGTERM
    assert await exits[0] < exit_deadline_s(1) + 3, "the drained replica outlived its deadline"
    assert balancer.status(draining.name).startswith("DOWN")
    assert other.metric(REQUESTS) > answered[other.name], "the resumed requests were answered by the last replica"
