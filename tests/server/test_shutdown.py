"""SIGTERM drains a real `voicestream serve` process: the request being spoken finishes, new
work is refused, /ping says 503, sessions close with 1001, the process exits."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import Iterator

import httpx
import pytest
from tests.server.wire import WirePeer, serve_process
from websockets.exceptions import ConnectionClosed

SPOKEN = " ".join(f"Sentence {n} is spoken while the server shuts down." for n in range(1, 3))
"""Two sentences, about 6 s of audio: the second still renders when the signal comes at the
first audio, and a drain that cut the request at a sentence would leave about 3 s."""
ALL_OF_IT_S = 4.5
"""More audio than the first sentence alone: the request was spoken to its end."""
EXITED_ON_SIGTERM = -signal.SIGTERM
"""The status of a server that drained and shut down: uvicorn raises the signal it caught
again once it is done, as a process that handled it should (`process.wait` times out
instead if the process does not end; a crash exits with 1)."""


async def _first_ping_not_ok(url: str) -> httpx.Response:
    """Poll /ping until it stops answering 200 (the signal is handled a moment after it is sent)."""
    async with httpx.AsyncClient() as client, asyncio.timeout(30):
        while (ping := await client.get(f"{url}/ping")).status_code == 200:
            await asyncio.sleep(0.02)
    return ping


@pytest.fixture
def server_process(engine) -> Iterator[tuple[subprocess.Popen, str]]:
    """A server of its own, whose drain has 120 s to finish what it speaks (four sentences
    rendered by niced workers once took more than 60 s beside three test workers on two cores)."""
    with serve_process(engine.files.model_path.parent, "--grace-s", "120") as started:
        yield started


async def test_sigterm_lets_the_request_being_spoken_finish(server_process) -> None:
    process, url = server_process
    speaking = await WirePeer.open(url)
    await speaking.send({"text": SPOKEN, "request_id": "inflight"})
    start = await speaking.ws.recv()
    assert "synthesis_start" in start
    while not isinstance(await speaking.ws.recv(), bytes):
        pass
    process.send_signal(signal.SIGTERM)
    ping = await _first_ping_not_ok(url)
    assert ping.status_code == 503 and ping.json()["status"] == "draining"
    await speaking.send({"text": "Too late.", "request_id": "late"})
    newcomer = await WirePeer.open(url)
    refused = await newcomer.answer(timeout=10)
    assert refused.last["code"] == "busy"

    finished = await speaking.answer(timeout=150)
    assert finished.last["type"] == "synthesis_complete" and finished.last["request_id"] == "inflight"
    assert finished.last["total_duration_s"] > ALL_OF_IT_S  # all of it, not cut mid-answer
    late = await speaking.answer(timeout=10)
    assert late.last["code"] == "busy" and late.last["request_id"] == "late"
    with pytest.raises(ConnectionClosed) as closed:
        await asyncio.wait_for(speaking.ws.recv(), 30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
    assert await asyncio.to_thread(process.wait, 30) == EXITED_ON_SIGTERM


async def test_sigterm_waits_for_an_http_stream_being_sent(server_process) -> None:
    """Drain sees every route's streams: a streamed `POST /invocations` in flight at SIGTERM
    is sent to its end (a cut chunked body would fail to read), then the process exits."""
    process, url = server_process
    received = bytearray()
    async with httpx.AsyncClient(timeout=150) as client, client.stream(
        "POST", f"{url}/invocations", json={"text": SPOKEN, "stream": True, "format": "pcm16"}
    ) as response:
        assert response.status_code == 200
        async for chunk in response.aiter_bytes():
            if not received:
                process.send_signal(signal.SIGTERM)
            received += chunk
    assert len(received) / 2 / 24000 > ALL_OF_IT_S  # both sentences, not cut at the signal
    assert await asyncio.to_thread(process.wait, 30) == EXITED_ON_SIGTERM
