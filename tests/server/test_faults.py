"""Failures are loud and finite: each becomes its request's `internal` frame, is logged once
with its traceback and request id, and leaves the session and the workers serving."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import httpx
import pytest
from tests.server.faults import (
    FINISH_FAULT_FORMAT,
    PLAN_FAULT,
    RENDER_FAULT,
    FaultyEngine,
    FinishFailsEncoder,
)
from tests.server.wire import WirePeer

import voicestream.speech.core as server_core
from voicestream.server import ServerSettings, free_port, running_server


@pytest.fixture(scope="module")
def faulty_server(engine) -> Iterator[str]:
    settings = ServerSettings(host="127.0.0.1", port=free_port())
    with running_server(FaultyEngine(engine), settings) as url:  # type: ignore[arg-type]
        yield url


async def test_failing_steps_leave_every_worker_serving(faulty_server: str) -> None:
    """More step failures than there are workers: a worker that died with its step would
    leave the last request waiting forever."""
    peer = await WirePeer.open(faulty_server)
    for index in range(6):
        await peer.send({"text": PLAN_FAULT, "request_id": f"bad{index}"})
    await peer.send({"text": "Still speaking.", "request_id": "good"})
    for index in range(6):
        failed = await peer.answer(timeout=60)
        assert failed.last == {"type": "error", "request_id": f"bad{index}", "code": "internal",
                               "message": failed.last["message"]}
        assert "injected" not in failed.last["message"]
    assert (await peer.answer(timeout=60)).kinds == ["synthesis_start", "synthesis_complete"]
    async with httpx.AsyncClient() as client:
        assert (await client.get(f"{faulty_server}/ping")).status_code == 200
    await peer.close()


async def test_encoder_failure_is_internal_and_session_goes_on(
    faulty_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An encoder that fails as it finishes: the request gets `internal`, the sender lives on."""
    real = server_core.create_encoder

    def create_encoder(format: str, sample_rate: int):
        encoder = real(format, sample_rate)
        return FinishFailsEncoder(encoder) if format == FINISH_FAULT_FORMAT else encoder

    monkeypatch.setattr(server_core, "create_encoder", create_encoder)
    peer = await WirePeer.open(faulty_server)
    await peer.send({"text": "Hello there.", "request_id": "enc", "format": FINISH_FAULT_FORMAT})
    await peer.send({"text": "Hello again.", "request_id": "after"})
    failed = await peer.answer(timeout=60)
    assert failed.kinds == ["synthesis_start", "error"]
    assert failed.last["code"] == "internal" and failed.last["request_id"] == "enc"
    assert (await peer.answer(timeout=60)).kinds == ["synthesis_start", "synthesis_complete"]
    await peer.close()


async def test_a_failure_is_logged_once_with_traceback_and_request_id(
    faulty_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    peer = await WirePeer.open(faulty_server)
    with caplog.at_level(logging.ERROR):
        await peer.send({"text": f"Fine first. {RENDER_FAULT}", "request_id": "logged"})
        failed = await peer.answer(timeout=60)
        await asyncio.sleep(0.2)
    assert failed.last["code"] == "internal"
    records = [r for r in caplog.records if getattr(r, "request_id", None) == "logged"]
    assert len(records) == 1, [r.getMessage() for r in caplog.records]
    assert records[0].exc_info is not None and "injected fault" in str(records[0].exc_info[1])
    await peer.close()


async def test_broken_socket_mid_request_ends_the_session(faulty_server: str) -> None:
    """A client that vanishes mid-stream frees its session and its work."""
    peer = await WirePeer.open(faulty_server)
    long_text = " ".join(f"Sentence {n} keeps the engine busy for a while." for n in range(12))
    await peer.send({"text": long_text, "request_id": "gone"})
    while not isinstance(await peer.ws.recv(), bytes):
        pass
    peer.ws.transport.abort()
    wanted = {"voicestream_active_sessions 0.0", "voicestream_queue_depth 0.0"}
    async with asyncio.timeout(60), httpx.AsyncClient() as client:
        while not wanted <= set((await client.get(f"{faulty_server}/metrics")).text.splitlines()):
            await asyncio.sleep(0.1)


async def test_ping_is_503_when_a_worker_is_gone(engine) -> None:
    """A worker that is gone and not restarted (here: cancelled from outside) means the
    server cannot synthesize at full capacity: /ping must say so."""
    import uvicorn

    from voicestream.asgi import serving
    from voicestream.server import create_app

    app = create_app(ServerSettings(host="127.0.0.1", port=free_port()), engine)
    config = uvicorn.Config(app, host="127.0.0.1", port=app.state.server.settings.port, log_config=None)
    with serving(config, "speech-server") as url:
        async with asyncio.timeout(60), httpx.AsyncClient() as client:
            while (await client.get(f"{url}/ping")).status_code != 200:
                await asyncio.sleep(0.1)
            worker = app.state.server.service.scheduler._tasks[0]
            worker.get_loop().call_soon_threadsafe(worker.cancel)
            while (ping := await client.get(f"{url}/ping")).status_code == 200:
                await asyncio.sleep(0.05)
    assert ping.status_code == 503 and ping.json()["status"] == "unhealthy"
