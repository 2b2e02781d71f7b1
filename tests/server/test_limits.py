"""Memory stays bounded whatever a client does: caps per session, per request and per body."""

from __future__ import annotations

import asyncio
import contextlib
import json

import httpx
from tests.server.wire import JSON_TYPE, WirePeer, metric, open_non_reader
from websockets.exceptions import ConnectionClosed

LONG_TEXT = " ".join(f"This is sentence number {n} of a long answer that nobody reads." for n in range(1, 25))
"""About 80 s of speech."""
WHOLE_FILE_TEXT = ("A whole file that nobody waits for. " * 560)[:20_000]
"""The longest text accepted: about twenty minutes of speech."""


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


async def test_a_client_that_never_reads_holds_bounded_audio(make_speech_server) -> None:
    """Three long requests pipelined by a client that never reads: the server's own
    accounting shows it held at most one share of unsent audio plus a piece per worker
    (however much the kernel's buffers took), another session is still served, and the
    hog's requests end when it hangs up."""
    share = 100_000
    url = make_speech_server(listener_budget_bytes=share)
    hog = await open_non_reader(url)
    for index in range(3):
        await hog.send(json.dumps({"text": LONG_TEXT, "request_id": f"h{index}"}))
    async with asyncio.timeout(60):
        while await metric(url, "voicestream_rendered_audio_seconds") == 0:
            await asyncio.sleep(0.1)
    other = await WirePeer.open(url)
    await other.send({"text": "Other sessions are unaffected.", "request_id": "other"})
    assert (await other.answer(timeout=60)).kinds == ["synthesis_start", "synthesis_complete"]
    await other.close()
    piece = 24_000 * 2 * 12  # a piece is at most about 12 s of pcm16 at 24 kHz
    assert await metric(url, "voicestream_peak_listener_buffered_bytes") <= share + 4 * piece
    hog.transport.abort()
    async with asyncio.timeout(30):
        while (await metric(url, "voicestream_queue_depth"), await metric(url, "voicestream_active_sessions")) != (0, 0):
            await asyncio.sleep(0.1)


async def test_a_session_that_floods_bad_messages_is_closed_once_and_read_no_further(make_speech_server, caplog) -> None:
    """Bad messages in a row past ``max_session_errors`` close the session with 1008: the
    server answers exactly that many, reads nothing after deciding, and logs it once."""
    url = make_speech_server(max_session_errors=50)
    hog = await open_non_reader(url)
    bad = json.dumps({"text": "Hi.", "voice": "zz_nobody", "request_id": "r" * 200})
    with contextlib.suppress(TimeoutError, ConnectionClosed):
        for _ in range(2_000):
            async with asyncio.timeout(2):
                await hog.send(bad)
    async with asyncio.timeout(30):
        while await metric(url, "voicestream_active_sessions") != 0:
            await asyncio.sleep(0.1)
    assert await metric(url, 'voicestream_errors_total{code="unknown_voice"}') == 50
    assert await metric(url, 'voicestream_sessions_closed_total{code="1008"}') == 1
    assert sum("bad messages in a row" in record.getMessage() for record in caplog.records) == 1
    hog.transport.abort()


async def test_a_client_that_stops_reading_and_hangs_up_frees_its_request(speech_server: str) -> None:
    """The leak of issue 16: a client stops reading mid-answer, then hangs up; its request
    ends whatever state it was in, and the queue is empty again."""
    hog = await open_non_reader(speech_server)
    await hog.send(json.dumps({"text": LONG_TEXT, "request_id": "gone"}))
    async with asyncio.timeout(60):
        while await metric(speech_server, "voicestream_rendered_audio_seconds") == 0:
            await asyncio.sleep(0.1)
    hog.transport.abort()
    async with asyncio.timeout(30):
        while (await metric(speech_server, "voicestream_queue_depth"),
               await metric(speech_server, "voicestream_active_sessions")) != (0, 0):
            await asyncio.sleep(0.1)


async def test_stalled_sessions_cannot_take_a_newcomers_reserve(make_speech_server) -> None:
    """Sessions that queue all they may and never read fill the shared slots; a new session
    still has its reserve (``max_queue // max_sessions``) and is served."""
    url = make_speech_server(max_queue=12, max_sessions=4, max_session_requests=32)
    stalled = [await open_non_reader(url) for _ in range(3)]
    for hog in stalled:
        for index in range(12):
            await hog.send(json.dumps({"text": LONG_TEXT, "request_id": f"s{index}"}))
    async with asyncio.timeout(30):
        while await metric(url, 'voicestream_errors_total{code="busy"}') < 3 * 12 - 12:
            await asyncio.sleep(0.1)
    reader = await WirePeer.open(url)
    for index in range(3):
        await reader.send({"text": "Still served.", "request_id": f"r{index}"})
    for _ in range(3):
        assert (await reader.answer(timeout=120)).kinds == ["synthesis_start", "synthesis_complete"]
    await reader.close()
    for hog in stalled:
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
    must not keep the engine busy: the server ends the request as cancelled (its own count),
    long before the 20 000-character text could have been spoken."""
    before = await metric(speech_server, 'voicestream_requests_ended_total{state="cancelled"}')
    async with httpx.AsyncClient(timeout=0.5) as client:
        with contextlib.suppress(httpx.TimeoutException):
            await client.post(f"{speech_server}/invocations", json={"text": WHOLE_FILE_TEXT, "stream": False})
    async with asyncio.timeout(30):
        while await metric(speech_server, "voicestream_queue_depth") != 0:
            await asyncio.sleep(0.1)
    assert await metric(speech_server, 'voicestream_requests_ended_total{state="cancelled"}') == before + 1


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
