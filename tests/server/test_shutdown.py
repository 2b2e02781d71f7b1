"""SIGTERM drains a real `voicestream serve` process: the request being spoken finishes, new
work is refused, /ping says 503, sessions close with 1001, the process exits; with more work
than its grace, it cuts what is left, tells each stream, and exits within its deadline."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.server.wire import WirePeer, serve_process, ws_url
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from voicestream.edge.drain import EXITED_ON_SIGNAL, exit_deadline_s
from voicestream.server import free_port

SPOKEN = " ".join(f"Sentence {n} is spoken while the server shuts down." for n in range(1, 3))
"""Two sentences, about 6 s of audio: the second still renders when the signal comes at the
first audio, and a drain that cut the request at a sentence would leave about 3 s."""
ALL_OF_IT_S = 4.5
"""More audio than the first sentence alone: the request was spoken to its end."""
EXITED_ON_SIGTERM = -signal.SIGTERM
"""The status of a server that drained and shut down: it raises the signal it caught again
once it is done, as a process that handled it should (`process.wait` times out instead if
the process does not end; a crash exits with 1; the deadline's watchdog exits with 143)."""


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


GRACE_S = 2.0
LONG_ANSWER = " ".join(
    f"Sentence {n} of a long answer goes on with clause after clause, so that no machine renders "
    "all of it, beside seven others like it, within a grace period of two seconds." for n in range(1, 13)
)
"""About a minute of audio: eight of them (six sessions and two HTTP streams) are several
minutes of audio to render in two seconds, far beyond any CPU (or GPU) this runs on, so the
drain must cut them: the test is about the server's own deadline, not the machine's speed."""
SESSIONS = 6
Frame = dict[str, Any]
EXIT_MARGIN_S = 3.0
"""Beyond the documented deadline: the signal's delivery and the kernel's teardown of the
process on a loaded machine."""


@pytest.fixture(params=[False, True], ids=["as-from-a-shell", "as-pid-1"])
def short_grace_server(request: pytest.FixtureRequest, engine) -> Iterator[tuple[subprocess.Popen, str, int]]:
    """A server with `GRACE_S` of grace, and the status it should exit with. ``as-pid-1``: it
    starts with SIGTERM ignored, so that the signal raised again at its end does not end it,
    as the kernel does for a container's PID 1 (the chart's pods, `docker run`): it must exit
    by itself, never through the interpreter's exit, which waits for every render thread."""
    ignoring = request.param
    with contextlib.ExitStack() as stack:
        with _started_ignoring_sigterm(ignoring):
            serving = serve_process(engine.files.model_path.parent, "--grace-s", str(GRACE_S))
            process, url = stack.enter_context(serving)
        yield process, url, EXITED_ON_SIGNAL + signal.SIGTERM if ignoring else EXITED_ON_SIGTERM


@contextlib.contextmanager
def _started_ignoring_sigterm(ignoring: bool) -> Iterator[None]:
    """Processes started in the block (``ignoring``) inherit SIGTERM ignored."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN) if ignoring else None
    try:
        yield
    finally:
        if ignoring:
            signal.signal(signal.SIGTERM, previous)


async def _session_until_closed(url: str, first_audio: asyncio.Event) -> tuple[int | None, list[Frame]]:
    """A session speaking `LONG_ANSWER`: its close code and its text frames."""
    frames: list[Frame] = []
    async with connect(ws_url(url), max_size=None) as ws:
        await ws.send(json.dumps({"text": LONG_ANSWER, "request_id": "long"}))
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                frame = await ws.recv()
                if isinstance(frame, bytes):
                    first_audio.set()
                else:
                    frames.append(json.loads(frame))
    received = closed.value.rcvd
    return (received.code if received else None), frames


async def _http_stream_until_cut(url: str, first_audio: asyncio.Event, sse: bool) -> tuple[str, list[Frame]]:
    """A streamed `POST /invocations` of `LONG_ANSWER` (raw pcm16 or SSE): how its body
    ended, and its SSE events without their audio."""
    events: list[Frame] = []
    headers = {"Accept": "text/event-stream"} if sse else {}
    body = {"text": LONG_ANSWER, "format": "pcm16", "stream": True}
    try:
        async with httpx.AsyncClient(timeout=120) as client, client.stream(
            "POST", f"{url}/invocations", json=body, headers=headers
        ) as response:
            async for line in (response.aiter_lines() if sse else response.aiter_bytes()):
                first_audio.set()
                if sse and line.startswith("data:"):
                    events.append({k: v for k, v in json.loads(line[5:]).items() if k != "data"})
    except httpx.RemoteProtocolError:
        return "unfinished", events
    return "whole", events


async def test_sigterm_with_more_work_than_the_grace_cuts_it_telling_each_stream_and_exits_by_the_deadline(
    short_grace_server,
) -> None:
    """Six sessions and two HTTP streams, each a minute of audio, `--grace-s 2`, SIGTERM at the
    first audio: whatever the machine, the renders cannot finish, so the drain cuts them at
    the grace. Every session is closed 1001 (going away); the SSE stream's last event is an
    error `busy`; both HTTP bodies end without their last chunk (never a whole short body);
    and the process exits with the status it is due, after its grace and within its
    documented deadline."""
    process, url, exit_status = short_grace_server
    first_audio = asyncio.Event()
    sessions = [asyncio.ensure_future(_session_until_closed(url, first_audio)) for _ in range(SESSIONS)]
    raw = asyncio.ensure_future(_http_stream_until_cut(url, first_audio, sse=False))
    sse = asyncio.ensure_future(_http_stream_until_cut(url, first_audio, sse=True))
    await asyncio.wait_for(first_audio.wait(), 120)
    signalled = time.monotonic()
    process.send_signal(signal.SIGTERM)
    status = await asyncio.to_thread(process.wait, exit_deadline_s(GRACE_S) + 30)
    took_s = time.monotonic() - signalled

    closed = await asyncio.wait_for(asyncio.gather(*sessions), 30)
    for code, frames in closed:
        assert code == 1001, (code, frames)
        assert all(frame["code"] == "busy" for frame in frames if frame["type"] == "error"), frames
        assert not [frame for frame in frames if frame["type"] == "synthesis_complete"]
    assert (await raw)[0] == "unfinished"
    ended, events = await sse
    assert ended == "unfinished", events[-3:]
    assert events[-1]["type"] == "error" and events[-1]["code"] == "busy", events[-3:]
    assert status == exit_status
    assert GRACE_S <= took_s < exit_deadline_s(GRACE_S) + EXIT_MARGIN_S, took_s


HUNG_SHUTDOWN = textwrap.dedent("""
    import asyncio, contextlib, sys, time
    import uvicorn
    from starlette.applications import Starlette
    from voicestream.edge.drain import DrainingServer
    from voicestream.logs import configure_logging

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        await asyncio.to_thread(time.sleep, 3600)  # a render that never returns

    async def nothing_to_drain():
        pass

    configure_logging("warning")
    app = Starlette(lifespan=lifespan)
    config = uvicorn.Config(app, host="127.0.0.1", port=int(sys.argv[1]), log_config=None)
    DrainingServer(config, drain=nothing_to_drain, grace_s=0).run()
""")


def test_a_shutdown_that_hangs_is_ended_by_the_watchdog_at_the_deadline() -> None:
    """Whatever the server is doing once SIGTERM came (here its lifespan waits forever on a
    thread, as on a render that cannot be stopped), the process exits at its deadline, with
    the status a shell gives a process the signal ended (143), and says what it abandoned."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", HUNG_SHUTDOWN, str(port)], stderr=subprocess.PIPE, text=True,
        env={**os.environ, "VOICESTREAM_OFFLINE": "1"},
    )
    try:
        deadline = time.monotonic() + 60
        while not _listening(port):
            assert process.poll() is None and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        status = process.wait(exit_deadline_s(0) + 30)
        took_s = time.monotonic() - signalled
        logged = process.stderr.read() if process.stderr else ""
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert status == EXITED_ON_SIGNAL + signal.SIGTERM, logged
    assert exit_deadline_s(0) - 0.5 <= took_s < exit_deadline_s(0) + EXIT_MARGIN_S, took_s
    assert f"exiting at the {exit_deadline_s(0):g} s deadline; 1 threads still at work" in logged, logged


def _listening(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/", timeout=1).status_code == 404
    except httpx.TransportError:
        return False
