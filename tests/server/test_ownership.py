"""Jobs owned from birth (issue 27): a request is queued only once everything it needs is
built, a route that queued one always consumes or cancels it, and the scheduler's reaper
ends whatever a route left behind (its listener gone), whatever its state.

A refusal through a real route is checked on a real server over loopback. A body that never
starts cannot be reached on a socket at will (the client's hang-up must land between the
route's return and the response's first step, and uvicorn's ASGI 2.3 ``send`` never fails),
so those tests drive the real app through its ASGI interface as a server of ASGI spec 2.4
does for a client that hung up: the body is read, then ``receive`` says ``http.disconnect``
and ``send`` raises an ``OSError`` (the spec's "the connection is closed"). The reaper's
tests use a real service on the real engine, its listener closed as a route's exit closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.requests import ClientDisconnect, Request
from tests.server.wire import JSON_TYPE, metric

from voicestream.audio import create_encoder
from voicestream.engine import KokoroEngine
from voicestream.protocol import ErrorCode
from voicestream.server import ServerSettings, create_app
from voicestream.server.faces.http import invocations
from voicestream.speech.core import Output, RequestRejected, SpeechCore, Voice
from voicestream.speech.job import JobFailed, JobState, Listener
from voicestream.speech.metrics import ServerMetrics

LONG_TEXT = " ".join(f"Sentence {n} of an answer nobody takes." for n in range(1, 13))
HEART = Voice("af_heart", 1.0, None)
PCM16 = Output("pcm16", 24000)


def _value(metrics: ServerMetrics, name: str) -> float:
    """One series of the service's own /metrics text (as `wire.metric` reads the server's)."""
    text = metrics.render().decode()
    values = [line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")]
    return float(values[0]) if values else 0.0


@contextlib.asynccontextmanager
async def _service(engine: KokoroEngine, **settings: Any) -> AsyncIterator[SpeechCore]:
    service = SpeechCore(engine, ServerSettings(**settings), ServerMetrics())
    service.scheduler.start()
    try:
        yield service
    finally:
        await service.scheduler.stop()


async def _until(condition, timeout_s: float = 60) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.05)


# --- an encoder that cannot start ---------------------------------------------------------


async def test_an_encoder_that_cannot_start_is_refused_with_nothing_queued(make_speech_server) -> None:
    """``POST /tts/bytes`` asking mp3 at a bit rate FFmpeg cannot take (2**63 b/s overflows
    its 64-bit field): the route's encoder factory raises. The request is refused with a
    clear ``unsupported_format``, and nothing was queued or counted as accepted. (Before,
    the job was submitted first and its encoder swapped in after: the factory's error was a
    500 and the job stayed queued with no owner.)"""
    url = make_speech_server()
    body = {"transcript": "Never queued.", "voice": {"mode": "id", "id": "af_heart"},
            "output_format": {"container": "mp3", "sample_rate": 24000, "bit_rate": 2**63}}
    async with httpx.AsyncClient(timeout=60) as client:
        response = await client.post(f"{url}/tts/bytes", content=json.dumps(body), headers=JSON_TYPE)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "unsupported_format" and "encoder" in error["message"]
    assert await metric(url, "voicestream_queue_depth") == 0
    assert await metric(url, 'voicestream_requests_total{route="cartesia"}') == 0
    assert await metric(url, 'voicestream_errors_total{code="unsupported_format"}') == 1


async def test_a_failing_encoder_factory_passed_to_start_queues_nothing(engine: KokoroEngine) -> None:
    """``SpeechCore.start`` builds an `Output`'s encoder (``encoder=factory``) before it submits:
    a real FFmpeg refusal (Opus at 1 Gb/s) is a `RequestRejected` and the queue stays empty."""
    async with _service(engine) as service:
        listener = Listener()
        with pytest.raises(RequestRejected) as refused:
            service.start("Never queued.", HEART, Output("opus", 24000, lambda: create_encoder("opus", 24000, bitrate=10**9)),
                          listener, "r", "test")
        assert refused.value.code is ErrorCode.UNSUPPORTED_FORMAT
        assert service.scheduler.depth == 0 and _value(service.metrics, "voicestream_queue_depth") == 0
        assert _value(service.metrics, 'voicestream_requests_total{route="test"}') == 0
        job = service.start("Queued.", HEART, Output("opus", 24000, lambda: create_encoder("opus", 24000, bitrate=32_000)),
                            listener, "r2", "test")
        assert service.scheduler.depth == 1
        job.cancel()
        assert service.scheduler.depth == 0


# --- a body that never starts ---------------------------------------------------------------


def _scope(path: str, body: bytes, accept: str = "*/*") -> dict[str, Any]:
    return {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
        "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
        "query_string": b"", "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 8080),
        "headers": [(b"host", b"127.0.0.1:8080"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()), (b"accept", accept.encode())],
    }


def _hung_up_after(body: bytes):
    """A server's ``receive`` for a client that sent its request and hung up: the body, then
    ``http.disconnect`` for ever."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


async def _gone(message: dict[str, Any]) -> None:
    """A server's ``send`` once its client is gone (ASGI 2.4: an ``OSError``)."""
    raise ConnectionResetError("the client hung up")


@contextlib.asynccontextmanager
async def _app(engine: KokoroEngine) -> AsyncIterator[tuple[Any, SpeechCore]]:
    """The real app, started by its own lifespan on the session's engine."""
    app = create_app(ServerSettings(), engine)
    async with app.router.lifespan_context(app):
        service = await app.state.server.wait()
        assert service is not None
        yield app, service


STREAMED = [
    ("/invocations", {"text": LONG_TEXT, "stream": True}, "*/*"),
    ("/invocations", {"text": LONG_TEXT}, "text/event-stream"),
    ("/v1/audio/speech", {"input": LONG_TEXT, "voice": "af_heart"}, "*/*"),
    ("/v1/audio/speech", {"input": LONG_TEXT, "voice": "af_heart", "stream_format": "sse"}, "*/*"),
    ("/dev/captioned_speech", {"input": LONG_TEXT, "voice": "af_heart"}, "*/*"),
    ("/tts/bytes", {"transcript": LONG_TEXT, "voice": {"mode": "id", "id": "af_heart"},
                    "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}}, "*/*"),
]


@pytest.mark.parametrize(("path", "request_body", "accept"), STREAMED,
                         ids=["invocations", "invocations-sse", "openai", "openai-sse", "captioned", "cartesia"])
async def test_a_streamed_answer_whose_body_never_starts_leaves_nothing_queued(
    engine: KokoroEngine, path: str, request_body: dict[str, Any], accept: str
) -> None:
    """The client hangs up after the route queued its request and before the response's
    first byte: sending the headers fails, so the body never takes its first step, and an
    async generator closed unstarted never runs its ``finally``. The response owns the
    request, so the queue is empty as soon as the response returns, without the reaper.
    (Before, the request stayed queued, rendered up to its budget and parked for good.)"""
    body = json.dumps(request_body).encode()
    async with _app(engine) as (app, service):
        with contextlib.suppress(ClientDisconnect):  # what Starlette makes of the OSError
            await app(_scope(path, body, accept), _hung_up_after(body), _gone)
        assert _value(service.metrics, "voicestream_requests_total{route=" + f'"{_route(path)}"' + "}") == 1
        assert service.scheduler.depth == 0 and _value(service.metrics, "voicestream_queue_depth") == 0
        assert _value(service.metrics, 'voicestream_requests_ended_total{state="cancelled"}') == 1
        assert service.scheduler.reaped == 0  # the response ended it, not the safety net


def _route(path: str) -> str:
    return {"/invocations": "invocations", "/v1/audio/speech": "openai", "/dev/captioned_speech": "captioned",
            "/tts/bytes": "cartesia"}[path]


async def test_a_response_that_is_never_sent_closes_its_listener_and_the_reaper_ends_its_request(
    engine: KokoroEngine,
) -> None:
    """A route's response dropped without ever being called (a layer above failed): its
    listener closes when the response is collected, and the reaper ends the request and
    counts it in ``voicestream_jobs_reaped_total``."""
    body = json.dumps({"text": LONG_TEXT, "stream": True}).encode()
    async with _app(engine) as (app, service):
        app.state.service = service
        scope = {**_scope("/invocations", body), "app": app}
        response = await invocations(Request(scope, _hung_up_after(body)))
        assert response.status_code == 200 and service.scheduler.depth == 1
        del response
        gc.collect()
        await _until(lambda: service.scheduler.depth == 0)
        assert service.scheduler.reaped == 1
        reaped = sum(_value(service.metrics, f'voicestream_jobs_reaped_total{{state="{state}"}}')
                     for state in ("queued", "speaking"))
        assert reaped == 1


# --- the reaper -----------------------------------------------------------------------------


async def test_the_reaper_ends_requests_parked_by_their_budget_once_their_listener_is_gone(
    engine: KokoroEngine,
) -> None:
    """Two requests of one listener, parked by a budget of one byte: the first speaking (a
    piece rendered, unsent), the second queued. Nobody consumes them and the listener
    closes: the reaper ends both (no worker would ever pick them again), frees their bytes
    and counts each by the state it was in."""
    async with _service(engine, listener_budget_bytes=1) as service:
        listener = Listener()
        speaking = service.start(LONG_TEXT, HEART, PCM16, listener, "a", "test")
        queued = service.start("Behind it.", HEART, PCM16, listener, "b", "test")
        await _until(lambda: service.scheduler.parked and speaking.held_bytes > 0)
        assert (speaking.state, queued.state) == (JobState.SPEAKING, JobState.QUEUED)
        assert service.scheduler.depth == 2 and not speaking.rendered_all
        listener.close()
        await _until(lambda: service.scheduler.depth == 0)
        assert (speaking.state, queued.state) == (JobState.CANCELLED, JobState.CANCELLED)
        assert listener.held_bytes == 0 and service.scheduler.held_bytes == 0
        assert service.scheduler.reaped == 2
        assert _value(service.metrics, 'voicestream_jobs_reaped_total{state="speaking"}') == 1
        assert _value(service.metrics, 'voicestream_jobs_reaped_total{state="queued"}') == 1


async def test_a_request_parked_by_its_budget_goes_stale_without_a_worker_picking_it(engine: KokoroEngine) -> None:
    """The first request is rendered and unsent, holding the listener's whole budget; the
    second is due (everything before it is rendered) but parked, so no worker picks it and
    the workers' own staleness check never runs. The reaper fails it ``request_stale``
    once it has waited past ``stale_after_s``; the first is still delivered whole."""
    async with _service(engine, listener_budget_bytes=1, stale_after_s=1.0) as service:
        listener = Listener()
        first = service.start("Hold this.", HEART, PCM16, listener, "a", "test")
        second = service.start("Too late.", HEART, PCM16, listener, "b", "test")
        await _until(lambda: first.rendered_all and service.scheduler.parked)
        assert second.state is JobState.QUEUED
        with pytest.raises(JobFailed) as failed:
            async with asyncio.timeout(30):
                async for _ in second.audio():
                    raise AssertionError("a stale request was spoken")
        assert failed.value.code is ErrorCode.REQUEST_STALE and second.state is JobState.FAILED
        assert b"".join([chunk.data async for chunk in first.audio()])
        assert first.state is JobState.DONE and service.scheduler.depth == 0
        listener.close()
        assert service.scheduler.reap() == 0 and service.scheduler.reaped == 0


# --- one error root -------------------------------------------------------------------------


def test_every_error_raised_below_the_faces_is_a_speech_fault() -> None:
    """One root, so that a face catches one class: the protocol's and the server's errors,
    the engine's refusals as the server maps them, carry an `ErrorCode`, a message and the
    request's id, and map to one HTTP status and one error frame. The engine's own errors
    know no wire: each refusal has its code in one table of the server's."""
    from voicestream.engine import (
        EngineError,
        InvalidInputError,
        InvalidSpeedError,
        TextTooLongError,
    )
    from voicestream.protocol import ProtocolError, SpeechFault, fault_frame, http_status
    from voicestream.speech.core import ENGINE_REFUSALS, SynthesisFailed, refused
    from voicestream.speech.scheduler import BusyError, RenderFailed

    faults = [
        ProtocolError(ErrorCode.INVALID_JSON, "not JSON", "r1"), refused(TextTooLongError("too long")),
        refused(InvalidSpeedError("too fast")), RequestRejected(ErrorCode.UNKNOWN_VOICE, "who?"),
        BusyError("full"), JobFailed(ErrorCode.REQUEST_STALE, "late"), RenderFailed(),
    ]
    assert all(isinstance(fault, SpeechFault) and isinstance(fault.code, ErrorCode) for fault in faults)
    assert SynthesisFailed is JobFailed and issubclass(BusyError, RequestRejected)
    assert not issubclass(EngineError, SpeechFault) and set(ENGINE_REFUSALS) == set(InvalidInputError.__subclasses__())
    assert (faults[1].code, faults[1].message) == (ErrorCode.TEXT_TOO_LONG, "too long")
    assert [fault.http_status for fault in faults] == [400, 413, 400, 400, 503, 408, 500]
    assert http_status("not_a_code") == 400
    frame = fault_frame(faults[0])
    assert (frame.request_id, frame.code, frame.message) == ("r1", "invalid_json", "not JSON")
    assert fault_frame(faults[4], "r2").request_id == "r2" and fault_frame(faults[4], "r2").code == "busy"
