"""A real load balancer in front of real replicas: Debian's haproxy (leastconn, health check
on /ping) and two `voicestream serve` processes on 127.0.0.1, as a Kubernetes Service or an
ingress would front the chart's pods. What it shows is what the chart's drain relies on:
sessions spread over the replicas, and a replica told to stop (SIGTERM) finishes the answer
it is speaking while the balancer takes it out and sends new sessions to the other.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from tests.deploy.balancer import Haproxy, Replica, haproxy, replicas, wait_for

from voicestream.client import SpeechSession
from voicestream.client.events import AudioChunk, SpeechCompleted, SpeechFailed
from voicestream.engine.weights import resolve_weights

SESSIONS = "voicestream_active_sessions"
REQUESTS = "voicestream_requests_total"
LONG_ANSWER = " ".join(f"Sentence {n} is spoken while the replica drains." for n in range(1, 4))


@pytest.fixture
def fleet(tmp_path: Path):
    model_dir = resolve_weights().model_path.parent
    with replicas(["a", "b"], model_dir) as started, haproxy(started, tmp_path) as balancer:
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
    # uvicorn ends a drained server by re-raising the signal it caught.
    assert await asyncio.to_thread(draining.process.wait, 60) == -signal.SIGTERM
    assert balancer.stats()[draining.name]["status"].startswith("DOWN")
