"""Memory stays bounded whatever a client does: caps per session, per request and per body."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import statistics

import httpx
from tests.server.wire import (
    JSON_TYPE,
    WirePeer,
    connect_non_reader,
    metric,
    open_non_reader,
    until_above,
    until_dropped,
    until_zero,
)
from websockets.exceptions import ConnectionClosed

LONG_TEXT = " ".join(f"This is sentence number {n} of a long answer that nobody reads." for n in range(1, 25))
"""About 80 s of speech."""
UNREAD_TEXT = {"text": LONG_TEXT, "sample_rate": 48000}
"""About 7 MB of pcm16, more than a kernel's send buffer grows to (4 MB by default): the
server's sends to a client that reads nothing back up, however large its buffers."""
WHOLE_FILE_TEXT = ("A whole file that nobody waits for. " * 560)[:20_000]
"""The longest text accepted: about twenty minutes of speech."""


async def test_one_session_cannot_take_every_slot(make_speech_server) -> None:
    """The queue has four slots; a session may hold two: a second session still gets in.
    The greedy session reads nothing until the end, so its first request is still being
    sent when it cancels, however fast this machine renders."""
    url = make_speech_server(max_queue=4, max_session_requests=2)
    greedy, other = WirePeer(await open_non_reader(url)), await WirePeer.open(url)
    for index in range(4):
        await greedy.send({**UNREAD_TEXT, "request_id": f"g{index}"})
    await until_above(url, 'voicestream_errors_total{code="busy"}', 1)  # its four messages all handled
    assert await metric(url, "voicestream_queue_depth") == 2
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
    await until_above(url, "voicestream_rendered_audio_seconds", 0)
    other = await WirePeer.open(url)
    await other.send({"text": "Other sessions are unaffected.", "request_id": "other"})
    assert (await other.answer(timeout=60)).kinds == ["synthesis_start", "synthesis_complete"]
    await other.close()
    piece = 24_000 * 2 * 12  # a piece is at most about 12 s of pcm16 at 24 kHz
    assert await metric(url, "voicestream_peak_listener_buffered_bytes") <= share + 4 * piece
    hog.transport.abort()
    await until_zero(url, "voicestream_queue_depth", "voicestream_active_sessions")


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
    await until_zero(url, "voicestream_active_sessions")
    assert await metric(url, 'voicestream_errors_total{code="unknown_voice"}') == 50
    assert await metric(url, 'voicestream_sessions_closed_total{code="1008"}') == 1
    assert sum("bad messages in a row" in record.getMessage() for record in caplog.records) == 1
    hog.transport.abort()


async def test_send_timeout_closes_a_session_that_takes_no_frame(make_speech_server, caplog) -> None:
    """``--send-timeout``: a client that stays connected but takes no frame for that long is
    closed with 1008 and its request is dropped; the server's own counts show it while the
    client still holds its end open (so nothing but the timeout ended it)."""
    url = make_speech_server(send_timeout_s=1.0, listener_budget_bytes=100_000)
    hog = await open_non_reader(url)
    await hog.send(json.dumps({**UNREAD_TEXT, "request_id": "unread"}))
    await until_above(url, 'voicestream_sessions_closed_total{code="1008"}', 0)
    assert await metric(url, 'voicestream_requests_ended_total{state="cancelled"}') == 1
    assert await metric(url, "voicestream_queue_depth") == await metric(url, "voicestream_active_sessions") == 0
    assert sum("took no frame for 1 s" in record.getMessage() for record in caplog.records) == 1
    hog.transport.abort()


async def test_send_timeout_drops_an_http_stream_nobody_reads(make_speech_server, caplog) -> None:
    """``--send-timeout`` on HTTP: a streamed response whose client takes no body chunk for
    that long is dropped, its request ends and its connection is dropped at once (before, it
    stayed open until the client hung up). Logged once: uvicorn adds no unfinished-response
    error of its own."""
    url = make_speech_server(send_timeout_s=1.0, listener_budget_bytes=100_000)
    body = json.dumps({**UNREAD_TEXT, "stream": True, "format": "pcm16"}).encode()
    head = ("POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    with await connect_non_reader(url) as client:
        await asyncio.get_running_loop().sock_sendall(client, head + body)
        await until_above(url, 'voicestream_requests_ended_total{state="cancelled"}', 0)
        await until_dropped(client)
        assert await metric(url, "voicestream_queue_depth") == 0
        assert await metric(url, 'voicestream_requests_ended_total{state="done"}') == 0
        warnings = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
        assert [message for message in warnings if "took nothing for 1 s" in message or "response" in message] == [
            "dropping a response whose client took nothing for 1 s"
        ], warnings


async def test_a_client_that_stops_reading_and_hangs_up_frees_its_request(speech_server: str) -> None:
    """The leak of issue 16: a client stops reading mid-answer, then hangs up; its request
    ends whatever state it was in, and the queue is empty again."""
    hog = await open_non_reader(speech_server)
    await hog.send(json.dumps({"text": LONG_TEXT, "request_id": "gone"}))
    await until_above(speech_server, "voicestream_rendered_audio_seconds", 0)
    hog.transport.abort()
    await until_zero(speech_server, "voicestream_queue_depth", "voicestream_active_sessions")


async def test_stalled_sessions_cannot_take_a_newcomers_reserve(make_speech_server) -> None:
    """Sessions that queue all they may and never read fill the shared slots; a new session
    still has its reserve (``max_queue // max_sessions``) and is served."""
    url = make_speech_server(max_queue=12, max_sessions=4, max_session_requests=32)
    stalled = [await open_non_reader(url) for _ in range(3)]
    for hog in stalled:
        for index in range(12):
            await hog.send(json.dumps({"text": LONG_TEXT, "request_id": f"s{index}"}))
    # 36 requests sent and 12 queue slots: at least 24 answered busy (counts are whole)
    await until_above(url, 'voicestream_errors_total{code="busy"}', 3 * 12 - 12 - 1)
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
    await until_zero(speech_server, "voicestream_queue_depth")
    assert await metric(speech_server, 'voicestream_requests_ended_total{state="cancelled"}') == before + 1


async def test_max_whole_files_refuses_one_more_whole_file_but_not_a_stream(make_speech_server) -> None:
    """``--max-whole-files 1``: while one `stream: false` response is being prepared, another
    is answered ``busy`` at once and a stream is still served; the slot is free again once
    the first client leaves."""
    url = make_speech_server(max_whole_files=1)
    invocations = f"{url}/invocations"
    async with httpx.AsyncClient(timeout=120) as holder, httpx.AsyncClient(timeout=120) as client:
        holding = asyncio.create_task(holder.post(invocations, json={"text": WHOLE_FILE_TEXT, "stream": False}))
        # counted as a whole file in the same step that queues it
        await until_above(url, 'voicestream_requests_total{route="invocations"}', 0)
        refused = await client.post(invocations, json={"text": "One more whole file.", "stream": False})
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "busy"
        streamed = await client.post(invocations, json={"text": "A stream is not a file.", "stream": True})
        assert streamed.status_code == 200 and streamed.content
        holding.cancel()
        await holder.aclose()  # the first client hangs up: its request is cancelled
        async with asyncio.timeout(30):
            while (again := await client.post(invocations, json={"text": "Hi.", "stream": False})).status_code == 503:
                await asyncio.sleep(0.1)
        assert again.status_code == 200 and float(again.headers["X-Audio-Duration"]) > 0
    with contextlib.suppress(asyncio.CancelledError):
        await holding
    assert await metric(url, 'voicestream_requests_ended_total{state="cancelled"}') == 1


async def test_idle_timeout_spares_a_session_still_taking_its_audio(make_speech_server) -> None:
    """Idle means nothing received and nothing sent: a reader that answers half a timeout
    after its audio ends is still served, however long the audio took. (Before, the idle
    clock ran from the last message, in steps of the timeout, and closed the session at the
    first step after the audio ended: a reply half a timeout late was cut one round in two.)
    The pause is the scenario itself; half of a 2 s timeout leaves the machine a second."""
    timeout_s = 2.0
    url = make_speech_server(idle_timeout_s=timeout_s)
    peer = await WirePeer.open(url)
    for round in range(3):
        await peer.send({"text": "Hello there. Here is a second short sentence.", "request_id": f"r{round}"})
        answer = await peer.answer()
        assert answer.kinds == ["synthesis_start", "synthesis_complete"]
        await asyncio.sleep(timeout_s / 2)
    await peer.close()


ADVERSARIAL_TEXTS = ["$" * 20_000, "1" * 20_000, "a" * 20_000, "[" * 20_000, "a. " * 6_666]
"""Inputs that froze the whole server for seconds when the normalizer's patterns were quadratic."""


PLAIN_TEXT = WHOLE_FILE_TEXT
"""Prose as long as the adversarial texts: what the same load costs /ping when the text is harmless."""


async def _ping_latencies_while_speaking(base_url: str, texts: list[str]) -> list[float]:
    """Ten /ping round trips while ``texts`` are read, normalized and rendered as streams,
    which are then left (the server ends them: the queue is empty again before this returns)."""
    pinged = asyncio.Event()
    async with httpx.AsyncClient(timeout=120) as client:

        async def speak(text: str) -> int:
            async with client.stream("POST", f"{base_url}/invocations",
                                     json={"text": text, "stream": True, "format": "pcm16"}) as response:
                await pinged.wait()  # the request is read, normalized and rendered meanwhile
                return response.status_code

        speaking = [asyncio.create_task(speak(text)) for text in texts]
        latencies = []
        for _ in range(10):
            started = asyncio.get_running_loop().time()
            assert (await client.get(f"{base_url}/ping")).status_code == 200
            latencies.append(asyncio.get_running_loop().time() - started)
            await asyncio.sleep(0.1)
        pinged.set()
        statuses = await asyncio.gather(*speaking)
    assert all(status == 200 for status in statuses)
    await until_zero(base_url, "voicestream_queue_depth")
    return latencies


async def test_ping_keeps_answering_while_adversarial_texts_are_spoken(speech_server: str) -> None:
    """The text path is linear, so no request holds the interpreter long enough to stop the
    event loop: a typical /ping while the adversarial texts are read is no slower than the
    slowest while plain prose of the same length is (taking turns, so that the machine's
    load weighs on both). A quadratic pattern holds the loop for seconds: every ping waits."""
    adversarial: list[float] = []
    plain: list[float] = []
    for _ in range(2):
        plain += await _ping_latencies_while_speaking(speech_server, [PLAIN_TEXT] * len(ADVERSARIAL_TEXTS))
        adversarial += await _ping_latencies_while_speaking(speech_server, ADVERSARIAL_TEXTS)
    assert statistics.median(adversarial) <= max(plain), (adversarial, plain)
