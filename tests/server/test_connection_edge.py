"""One edge for every persistent face (issue 27): the session, Cartesia's socket and Wyoming
share the send timeout, the idle clock and the drain of `voicestream.edge.connection`.

One real server for the module, in process on the session's replaying engine (its pieces
rendered once by the real model, then given again: these tests check the edge around the
render, not its time), with a 3 s send timeout, a 2 s idle timeout and a Wyoming port; the
drain's test runs `voicestream serve` as a process of its own, to send it SIGTERM. Every
check reads the server's own accounting
(sessions open, queue depth, closes by code) or the kernel's (the peer's TCP state), never a
wall-clock bound: each face's peer that stops reading, or never speaks, is closed by the
server while the peer still holds its end open, its slots are freed (and the connection of
one that stops reading dropped), and a new client on that face is then served.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import signal
import socket
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

import pytest
from tests.replaying import ReplayingEngine
from tests.server.test_limits import LONG_TEXT
from tests.server.wire import (
    WirePeer,
    connect_non_reader,
    metric,
    open_non_reader,
    serve_process,
    until_above,
    until_dropped,
    until_zero,
    ws_url,
)
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from wyoming.audio import AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeVoice

from voicestream.server import free_port
from voicestream.server.runner import running_server
from voicestream.speech.settings import ServerSettings

pytestmark = pytest.mark.timeout(400)

SEND_TIMEOUT_S = 3
IDLE_TIMEOUT_S = 2
EXITED_ON_SIGTERM = -signal.SIGTERM
ACTIVE = "voicestream_active_sessions"
DEPTH = "voicestream_queue_depth"
RENDERING = "voicestream_rendering_pieces"
RENDERED = "voicestream_rendered_audio_seconds"


def closed(code: int) -> str:
    return f'voicestream_sessions_closed_total{{code="{code}"}}'


@dataclass(frozen=True)
class Server:
    url: str
    wyoming_port: int

    @property
    def wyoming_url(self) -> str:
        """The Wyoming port as a URL, for `connect_non_reader`."""
        return f"http://127.0.0.1:{self.wyoming_port}"


def cartesia_url(base_url: str) -> str:
    return base_url.replace("http://", "ws://") + "/tts/websocket"


def cartesia_message(context_id: str, transcript: str, **extra: object) -> str:
    return json.dumps({"context_id": context_id, "transcript": transcript, "voice": {"mode": "id", "id": "af_heart"},
                       "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}, **extra})


@contextlib.contextmanager
def _serve(engine, *flags: str) -> Iterator[tuple[object, Server]]:
    port = free_port()
    with serve_process(engine.files.model_path.parent, "--wyoming-port", str(port), *flags) as (process, url):
        yield process, Server(url, port)


@pytest.fixture(scope="module")
def server(replaying_engine: ReplayingEngine) -> Iterator[Server]:
    """Small timeouts and a small listener budget: a peer that reads nothing backs up soon."""
    settings = ServerSettings(host="127.0.0.1", port=free_port(), wyoming_port=free_port(),
                              send_timeout_s=SEND_TIMEOUT_S, idle_timeout_s=IDLE_TIMEOUT_S,
                              listener_budget_bytes=100_000)
    assert settings.wyoming_port is not None
    with running_server(replaying_engine, settings) as url:  # type: ignore[arg-type]
        yield Server(url, settings.wyoming_port)


# --- each face: a peer that never reads, one that never speaks, one that is served ----------


NonReader = tuple[socket.socket | ClientConnection, Callable[[], None]]
"""A peer that reads nothing: its connection (for `until_dropped`), and how to hang it up."""


async def _websocket_non_reader(server: Server, address: str, *messages: str) -> NonReader:
    """`open_non_reader` at ``address``, after sending ``messages``."""
    ws = await open_non_reader(server.url, address)
    for message in messages:
        await ws.send(message)
    return ws, ws.transport.abort


async def _session_non_reader(server: Server) -> NonReader:
    request = {"text": LONG_TEXT, "sample_rate": 48000, "request_id": "unread"}
    return await _websocket_non_reader(server, ws_url(server.url), json.dumps(request))


async def _cartesia_non_reader(server: Server) -> NonReader:
    f32 = {"container": "raw", "encoding": "pcm_f32le", "sample_rate": 48000}  # 256 kB of JSON a second
    return await _websocket_non_reader(server, cartesia_url(server.url),
                                       cartesia_message("unread", LONG_TEXT, output_format=f32))


def deepgram_url(base_url: str) -> str:
    return base_url.replace("http://", "ws://") + "/v1/speak?model=af_heart&encoding=linear16&sample_rate=48000"


async def _deepgram_non_reader(server: Server) -> NonReader:
    return await _websocket_non_reader(server, deepgram_url(server.url),
                                       json.dumps({"type": "Speak", "text": LONG_TEXT}), json.dumps({"type": "Flush"}))


def elevenlabs_url(base_url: str) -> str:
    return base_url.replace("http://", "ws://") + "/v1/text-to-speech/af_heart/multi-stream-input?output_format=pcm_44100"


async def _elevenlabs_non_reader(server: Server) -> NonReader:
    return await _websocket_non_reader(server, elevenlabs_url(server.url),
                                       json.dumps({"text": LONG_TEXT, "context_id": "unread", "flush": True}))


async def _wyoming_non_reader(server: Server) -> NonReader:
    sock = await connect_non_reader(server.wyoming_url)
    event = Synthesize(text=LONG_TEXT).event()
    data = json.dumps(event.data).encode()
    header = json.dumps({"type": event.type, "data_length": len(data)}).encode() + b"\n"
    await asyncio.get_running_loop().sock_sendall(sock, header + data)
    return sock, sock.close


async def _session_served(server: Server) -> None:
    peer = await WirePeer.open(server.url)
    await peer.send({"text": "Served after the hog.", "request_id": "next"})
    assert (await peer.answer(timeout=120)).kinds == ["synthesis_start", "synthesis_complete"]
    await peer.close()


async def _cartesia_until(ws: ClientConnection, kind: str) -> bytes:
    """Answers up to the first of ``kind``; the audio before it."""
    audio = bytearray()
    async with asyncio.timeout(120):
        while (answer := json.loads(await ws.recv()))["type"] != kind:
            assert answer["type"] != "error", answer
            if answer["type"] == "chunk":
                audio += base64.b64decode(answer["data"])
    return bytes(audio)


async def _cartesia_served(server: Server) -> None:
    async with connect(cartesia_url(server.url), max_size=None) as ws:
        await ws.send(cartesia_message("next", "Served after the hog."))
        assert await _cartesia_until(ws, "done")


async def _deepgram_served(server: Server) -> None:
    async with connect(deepgram_url(server.url), max_size=None) as ws:
        await ws.send(json.dumps({"type": "Speak", "text": "Served after the hog."}))
        await ws.send(json.dumps({"type": "Flush"}))
        audio = 0
        async with asyncio.timeout(120):
            while not isinstance(answer := await ws.recv(), str) or json.loads(answer)["type"] != "Flushed":
                assert isinstance(answer, bytes) or json.loads(answer)["type"] == "Metadata", answer
                audio += len(answer) if isinstance(answer, bytes) else 0
        assert audio


async def _elevenlabs_served(server: Server) -> None:
    async with connect(elevenlabs_url(server.url), max_size=None) as ws:
        await ws.send(json.dumps({"text": "Served after the hog.", "context_id": "next", "flush": True}))
        await ws.send(json.dumps({"text": "", "context_id": "next", "flush": True}))  # then closing ends it
        await ws.send(json.dumps({"context_id": "next", "close_context": True}))
        audio = 0
        async with asyncio.timeout(120):
            while not (answer := json.loads(await ws.recv())).get("isFinal"):
                assert "error" not in answer, answer
                audio += len(answer.get("audio") or "")
        assert audio


async def _wyoming_sentence(client: AsyncTcpClient) -> None:
    """Events up to an ``audio-stop``."""
    async with asyncio.timeout(120):
        while True:
            event = await client.read_event()
            assert event is not None and event.type != "error", event
            if AudioStop.is_type(event.type):
                return


async def _wyoming_served(server: Server) -> None:
    async with AsyncTcpClient("127.0.0.1", server.wyoming_port) as client:
        await client.write_event(Synthesize(text="Served after the hog.").event())
        await _wyoming_sentence(client)


async def _websocket_silent(url: str) -> Callable[[], Awaitable[None]]:
    ws = await connect(url, max_size=None)
    return ws.close


async def _session_silent(server: Server) -> Callable[[], Awaitable[None]]:
    return await _websocket_silent(ws_url(server.url))


async def _cartesia_silent(server: Server) -> Callable[[], Awaitable[None]]:
    return await _websocket_silent(cartesia_url(server.url))


async def _deepgram_silent(server: Server) -> Callable[[], Awaitable[None]]:
    return await _websocket_silent(deepgram_url(server.url))


async def _elevenlabs_silent(server: Server) -> Callable[[], Awaitable[None]]:
    return await _websocket_silent(elevenlabs_url(server.url))


async def _wyoming_silent(server: Server) -> Callable[[], Awaitable[None]]:
    _, writer = await asyncio.open_connection("127.0.0.1", server.wyoming_port)

    async def close() -> None:
        writer.close()

    return close


FACES = {
    "session": (_session_non_reader, _session_silent, _session_served),
    "cartesia": (_cartesia_non_reader, _cartesia_silent, _cartesia_served),
    "wyoming": (_wyoming_non_reader, _wyoming_silent, _wyoming_served),
    "deepgram": (_deepgram_non_reader, _deepgram_silent, _deepgram_served),
    "elevenlabs": (_elevenlabs_non_reader, _elevenlabs_silent, _elevenlabs_served),
}


@pytest.mark.parametrize("face", FACES)
async def test_a_peer_that_stops_reading_is_closed_at_the_send_timeout_and_frees_its_slots(
    server: Server, face: str,
) -> None:
    """A long answer to a peer that never reads: the server closes it (1008, counted) while
    the peer still holds its end open, its request ends, its session slot and queue slots are
    free, its connection is dropped (a close frame it would never take held the socket on
    the WebSocket faces until the peer hung up), and a new client on the same face is served.
    Before issue 27 Cartesia's and Wyoming's senders waited for such a peer forever."""
    non_reader, _, served = FACES[face]
    before = await metric(server.url, closed(1008))
    sock, abort = await non_reader(server)
    try:
        await until_above(server.url, closed(1008), before, timeout_s=240)
        await until_zero(server.url, ACTIVE, DEPTH, RENDERING)
        assert await metric(server.url, closed(1008)) == before + 1
        rendered = await metric(server.url, RENDERED)
        await until_dropped(sock)
        # none of its work goes on: nothing queued or rendering, and no audio rendered since
        assert (await metric(server.url, DEPTH), await metric(server.url, RENDERING)) == (0, 0)
        assert await metric(server.url, RENDERED) == rendered
        await served(server)
    finally:
        abort()


@pytest.mark.parametrize("face", FACES)
async def test_a_peer_that_never_speaks_is_closed_at_the_idle_timeout(server: Server, face: str) -> None:
    """A peer that connects and sends nothing is closed by the server (an idle close, 1000,
    counted) while it still holds its end open. Wyoming had no idle timeout."""
    _, silent, _ = FACES[face]
    before = await metric(server.url, closed(1000))
    close = await silent(server)
    try:
        await until_above(server.url, ACTIVE, 0)
        await until_zero(server.url, ACTIVE, timeout_s=120)
        assert await metric(server.url, closed(1000)) == before + 1
    finally:
        await close()


async def test_an_open_session_utterance_with_nothing_left_to_say_goes_idle(server: Server) -> None:
    """A streamed utterance left open (``continue: true``, no last piece) whose audio is all
    out asks nothing: the session is idle and closed at the idle timeout (before, an open
    utterance kept it forever)."""
    before = await metric(server.url, closed(1000))
    peer = await WirePeer.open(server.url)
    try:
        await peer.send({"text": "Hello there.", "request_id": "open", "continue": True})
        await until_above(server.url, ACTIVE, 0)
        await until_zero(server.url, ACTIVE, timeout_s=120)
        assert await metric(server.url, closed(1000)) == before + 1
        frames = [frame async for frame in peer.ws]  # what it was sent before the idle close
        assert json.loads(frames[0])["type"] == "synthesis_start"
        assert sum(len(frame) for frame in frames if isinstance(frame, bytes)) > 0
    finally:
        await peer.close()


async def test_an_open_cartesia_context_with_nothing_left_to_say_goes_idle(server: Server) -> None:
    """A context left open (``continue: true``) whose audio is all out asks nothing: the
    socket is idle and closed at the idle timeout (before, an open context kept it forever)."""
    before = await metric(server.url, closed(1000))
    async with connect(cartesia_url(server.url), max_size=None) as ws:
        await ws.send(cartesia_message("open", "Hello there.", **{"continue": True, "flush": True}))
        assert await _cartesia_until(ws, "flush_done")
        with pytest.raises(ConnectionClosed) as ended:
            await asyncio.wait_for(ws.recv(), 120)
    assert ended.value.rcvd is not None and ended.value.rcvd.code == 1000
    await until_zero(server.url, ACTIVE)
    assert await metric(server.url, closed(1000)) == before + 1


# --- drain: an open stream with nothing left to say does not hold the shutdown ------------------


@pytest.fixture
def draining_server(engine) -> Iterator[tuple[object, Server]]:
    """A grace far longer than any test: a server that waits for it never exits in time."""
    with _serve(engine, "--grace-s", "600") as started:
        yield started


async def _exits_on_sigterm(process) -> int:
    process.send_signal(signal.SIGTERM)
    return await asyncio.to_thread(process.wait, 120)


async def test_sigterm_ends_an_open_cartesia_context_and_an_open_wyoming_stream_with_nothing_left_to_say(
    draining_server,
) -> None:
    """A Cartesia context and a Wyoming stream, each left open with all its audio out, on one
    server: SIGTERM ends both (Cartesia with 1001, Wyoming by closing the stream) and the
    process exits long before its 600 s grace. Before issue 27 either held the drain."""
    process, server = draining_server
    async with connect(cartesia_url(server.url), max_size=None) as ws, \
            AsyncTcpClient("127.0.0.1", server.wyoming_port) as client:
        await ws.send(cartesia_message("open", "Hello there.", **{"continue": True, "flush": True}))
        assert await _cartesia_until(ws, "flush_done")
        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="af_heart")).event())
        await client.write_event(SynthesizeChunk(text="Hello there. ").event())
        await _wyoming_sentence(client)
        exiting = asyncio.create_task(_exits_on_sigterm(process))
        with pytest.raises(ConnectionClosed) as ended:
            await asyncio.wait_for(ws.recv(), 120)
        async with asyncio.timeout(120):
            while (event := await client.read_event()) is not None:
                assert isinstance(event, Event)
    assert ended.value.rcvd is not None and ended.value.rcvd.code == 1001
    assert await exiting == EXITED_ON_SIGTERM
