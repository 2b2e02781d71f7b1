"""Memory stays bounded whatever a client does: caps per session, per request and per body."""

from __future__ import annotations

import asyncio
import contextlib
import json

import httpx
from tests.server.wire import JSON_TYPE, WirePeer, metric, open_non_reader

LONG_TEXT = " ".join(f"This is sentence number {n} of a long answer that nobody reads." for n in range(1, 25))
"""About 80 s of speech."""


async def test_one_session_cannot_take_every_slot(make_speech_server) -> None:
    """The queue has four slots; a session may hold two: a second session still gets in."""
    url = make_speech_server(max_queue=4, max_session_requests=2)
    greedy, other = await WirePeer.open(url), await WirePeer.open(url)
    for index in range(4):
        await greedy.send({"text": LONG_TEXT, "request_id": f"g{index}"})
    await asyncio.sleep(0.3)
    for index in range(2):
        await other.send({"text": "My turn.", "request_id": f"o{index}"})
    for index in range(2):
        assert (await other.answer()).kinds == ["synthesis_start", "synthesis_complete"]
    await greedy.send({"type": "cancel"})
    answers = [await greedy.answer() for _ in range(4)]
    assert [a.last["type"] for a in answers] == ["synthesis_cancelled"] * 2 + ["error"] * 2
    assert {a.last["code"] for a in answers[2:]} == {"busy"}
    assert [a.request_id for a in answers] == ["g0", "g1", "g2", "g3"]
    await greedy.close()
    await other.close()


async def test_a_client_that_never_reads_holds_bounded_audio(speech_server: str) -> None:
    """Three long requests (about four minutes of speech) pipelined by a client that never
    reads: rendering stops after a few pieces per request, and another session still
    gets its first audio."""
    hog = await open_non_reader(speech_server)
    before = await metric(speech_server, "voicestream_rendered_audio_seconds")
    for index in range(3):
        await hog.send(json.dumps({"text": LONG_TEXT, "request_id": f"h{index}"}))
    rendered = [0.0]
    async with asyncio.timeout(40):
        while len(rendered) < 6 or rendered[-1] != rendered[-6]:  # flat for 2.5 s
            await asyncio.sleep(0.5)
            rendered.append(await metric(speech_server, "voicestream_rendered_audio_seconds") - before)
    assert rendered[-1] < 80, f"{rendered[-1]:.0f} s of audio rendered for a client that reads nothing"
    other = await WirePeer.open(speech_server)
    await other.send({"text": "Other sessions are unaffected.", "request_id": "other"})
    assert (await other.answer(timeout=20)).kinds == ["synthesis_start", "synthesis_complete"]
    await other.close()
    hog.transport.abort()
    async with asyncio.timeout(20):
        while await metric(speech_server, "voicestream_queue_depth") != 0:
            await asyncio.sleep(0.1)


async def test_flood_of_bad_messages_without_reading_is_bounded(speech_server: str) -> None:
    """40 000 bad messages from a client that reads nothing: once the kernel's buffers are
    full the error frames pile up, and past 4096 of them the server closes the session
    (1008) rather than queue answers nobody reads."""
    hog = await open_non_reader(speech_server)
    hog.transport.pause_reading()
    before = await _errors(speech_server)
    bad = json.dumps({"text": "Hi.", "voice": "zz_nobody", "request_id": "r" * 200})
    sent = 0
    with contextlib.suppress(TimeoutError):
        for _ in range(40_000):
            async with asyncio.timeout(2):
                await hog.send(bad)
            sent += 1
    async with asyncio.timeout(30):
        while await metric(speech_server, "voicestream_active_sessions") != 0:
            await asyncio.sleep(0.2)
    # Frames in the kernel's socket buffers count as sent, so how many were answered depends
    # on their size; a server that read on would have answered every message it was sent.
    assert await _errors(speech_server) - before < sent, "the server read on, queueing answers"
    hog.transport.abort()


async def _errors(base_url: str) -> float:
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"{base_url}/metrics")).text
    return sum(float(line.split()[1]) for line in text.splitlines() if line.startswith("voicestream_errors_total{"))


def test_huge_http_body_is_refused_before_it_is_read(speech_server: str) -> None:
    declared = httpx.post(f"{speech_server}/invocations", content=b"x" * 5_000_000, headers=JSON_TYPE, timeout=30)
    assert declared.status_code == 413
    assert declared.json()["error"]["code"] == "payload_too_large"

    def endless():
        for _ in range(10_000):
            yield b" " * 65536  # 640 MB if the server read it all

    streamed = httpx.post(f"{speech_server}/v1/audio/speech", content=endless(), headers=JSON_TYPE, timeout=30)
    assert streamed.status_code == 413
    assert streamed.json()["error"]["code"] == "payload_too_large"


async def test_whole_file_request_is_cancelled_when_the_client_leaves(speech_server: str) -> None:
    """`stream: false` renders the whole file before answering; a client gone by then
    must not keep the engine busy."""
    async with httpx.AsyncClient(timeout=0.5) as client:
        try:
            await client.post(f"{speech_server}/invocations", json={"text": LONG_TEXT, "stream": False})
        except httpx.TimeoutException:
            pass
    async with asyncio.timeout(5):
        while await metric(speech_server, "voicestream_queue_depth") != 0:
            await asyncio.sleep(0.1)


async def test_idle_timeout_spares_a_session_still_taking_its_audio(make_speech_server) -> None:
    """Idle means nothing received and nothing sent: a reader that answers shortly after
    its audio ends is still served, however long the audio took. (Before, the idle check
    ran once a second from the last message and closed the session if it came just after
    the audio ended: each round had a 70 % chance to be cut.)"""
    url = make_speech_server(idle_timeout_s=1.0)
    peer = await WirePeer.open(url)
    for round in range(3):
        await peer.send({"text": "Hello there. Here is a second short sentence.", "request_id": f"r{round}"})
        answer = await peer.answer()
        assert answer.kinds == ["synthesis_start", "synthesis_complete"]
        await asyncio.sleep(0.7)
    await peer.close()
