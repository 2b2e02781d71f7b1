"""Chaos against a real speech server: fuzzed sessions, faults and a soak (docs/RELIABILITY.md).

The tests run these in a reduced form (seconds); `voicestream bench chaos` runs them in full
against a `voicestream serve` process, whose memory and open files it samples from /proc.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from voicestream.speech.scheduler import Budgets

SESSION_PATH = "/invocations-bidirectional-stream"
SHORT_TEXTS = ("Hello there.", "Fine, thanks.", "One more sentence.", "Yes.", "See you soon.")
AUDIO = "audio"
"""What a valid probe expects: `synthesis_start`, audio, `synthesis_complete`."""


@dataclass(frozen=True)
class Probe:
    """One client message and the answer it must get: `AUDIO` or an error code."""

    payload: str | bytes
    expect: str


def valid_probe(request_id: str, text: str) -> Probe:
    return Probe(json.dumps({"text": text, "request_id": request_id}), AUDIO)


def random_bad_probe(rng: random.Random) -> Probe:
    """One malformed message of a random kind, with the code the protocol gives it."""
    kind = rng.randrange(7)
    if kind == 0:  # binary noise that is not UTF-8
        return Probe(b"\xff" + rng.randbytes(rng.randrange(0, 64)), "invalid_json")
    if kind == 1:
        return Probe("{" + "".join(rng.choice("abc:,\"'[") for _ in range(rng.randrange(1, 40))), "invalid_json")
    if kind == 2:  # JSON, but not an object
        return Probe(json.dumps(rng.choice([[1, 2], 3, "text", None, 1.5])), "invalid_message")
    if kind == 3:  # wrong types
        return Probe(json.dumps({"text": rng.choice([1, [1], {"a": 1}, True])}), "invalid_message")
    if kind == 4:
        return Probe(json.dumps({"text": "word " * rng.randrange(4001, 6000)}), "text_too_long")
    if kind == 5:
        return Probe(json.dumps({"text": " " * rng.randrange(0, 9)}), "text_required")
    return Probe(json.dumps({"text": "Hi.", "speed": rng.choice([0, 9, -1, 100])}), "invalid_speed")


def fuzz_probes(rng: random.Random, count: int, valid_share: float, prefix: str) -> list[Probe]:
    return [
        valid_probe(f"{prefix}-{index}", rng.choice(SHORT_TEXTS))
        if rng.random() < valid_share
        else random_bad_probe(rng)
        for index in range(count)
    ]


@dataclass
class SessionReport:
    """What one session sent and got back."""

    valid_sent: int = 0
    completed: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    mismatches: list[str] = field(default_factory=list)


def session_url(base_url: str) -> str:
    return base_url.replace("http://", "ws://") + SESSION_PATH


async def run_probes(base_url: str, probes: list[Probe], timeout_s: float = 120.0) -> SessionReport:
    """Send `probes` on one session while reading its answers; check each answer in order."""
    report = SessionReport(valid_sent=sum(p.expect == AUDIO for p in probes))
    async with connect(session_url(base_url), max_size=None) as ws:
        sending = asyncio.create_task(_send_all(ws, probes))
        index = 0
        try:
            async with asyncio.timeout(timeout_s):
                for index, probe in enumerate(probes):
                    kinds, audio, last = await _answer(ws)
                    if last["type"] == "error":
                        report.errors[last["code"]] += 1
                    got = AUDIO if kinds == ["synthesis_start", "synthesis_complete"] and audio else last.get("code")
                    if probe.expect == AUDIO and got == AUDIO and last["audio_bytes"] == audio:
                        report.completed += 1
                    elif got != probe.expect:
                        report.mismatches.append(f"message {index}: expected {probe.expect}, got {kinds} {last}")
        except ConnectionClosed as closed:
            report.mismatches.append(f"session closed after {index} answers: {closed}")
        except TimeoutError:
            report.mismatches.append(f"no answer to message {index} within {timeout_s:g} s")
        finally:
            sending.cancel()
            await asyncio.gather(sending, return_exceptions=True)
    return report


async def _send_all(ws: ClientConnection, probes: list[Probe]) -> None:
    for probe in probes:
        await ws.send(probe.payload)


async def _answer(ws: ClientConnection) -> tuple[list[str], int, dict]:
    """One request's frames: their types, the audio bytes, the final frame."""
    kinds: list[str] = []
    audio = 0
    while True:
        frame = await ws.recv()
        if isinstance(frame, bytes):
            audio += len(frame)
            continue
        data = json.loads(frame)
        kinds.append(data["type"])
        if data["type"] in ("synthesis_complete", "error", "synthesis_cancelled"):
            return kinds, audio, data


async def fuzz(base_url: str, sessions: int, messages: int, seed: int) -> list[SessionReport]:
    """`sessions` concurrent sessions, each sending `messages` fuzzed messages (a third valid)."""
    rng = random.Random(seed)
    plans = [fuzz_probes(rng, messages, 1 / 3, f"s{index}") for index in range(sessions)]
    return list(await asyncio.gather(*(run_probes(base_url, plan, 600) for plan in plans)))


# --- soak ------------------------------------------------------------------------------------


@dataclass
class SoakReport:
    sessions: int
    duration_s: float
    requests: int = 0
    first_audio_s: list[float] = field(default_factory=list)
    busy: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    samples: list[tuple[float, int, int]] = field(default_factory=list)
    """(seconds since start, resident memory in kB, open file descriptors) of the server."""

    def percentile(self, share: float) -> float:
        ordered = sorted(self.first_audio_s)
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")

    def window(self, first: bool, seconds: float = 30.0) -> tuple[float, float]:
        """Mean memory (MB) and open files over the first or the last `seconds`."""
        end = self.samples[-1][0] if self.samples else 0.0
        chosen = [s for s in self.samples if (s[0] <= seconds if first else s[0] >= end - seconds)]
        if not chosen:
            return float("nan"), float("nan")
        return statistics.fmean(s[1] for s in chosen) / 1024, statistics.fmean(s[2] for s in chosen)


def _status_kb(pid: int, *names: str) -> dict[str, int]:
    """The sizes (kB) ``names`` ("VmRSS", "RssAnon", ...) of process `pid`, from /proc."""
    with open(f"/proc/{pid}/status") as status:
        return {name: int(rest.split()[0]) for name, _, rest in (line.partition(":") for line in status)
                if name in names}


def process_usage(pid: int) -> tuple[int, int]:
    """Resident memory (kB) and open file descriptors of process `pid`, from /proc."""
    return _status_kb(pid, "VmRSS")["VmRSS"], len(os.listdir(f"/proc/{pid}/fd"))


async def soak(base_url: str, sessions: int, duration_s: float, server_pid: int) -> SoakReport:
    """`sessions` sessions each speaking short sentences back to back for `duration_s`."""
    report = SoakReport(sessions, duration_s)
    started = time.monotonic()
    deadline = started + duration_s

    async def speaker(index: int) -> None:
        rng = random.Random(index)
        try:
            async with connect(session_url(base_url), max_size=None) as ws:
                while time.monotonic() < deadline:
                    sent = time.monotonic()
                    await ws.send(json.dumps({"text": rng.choice(SHORT_TEXTS), "request_id": f"{index}"}))
                    first = await ws.recv()  # synthesis_start, or an error
                    if isinstance(first, str) and json.loads(first)["type"] == "error":
                        code = json.loads(first)["code"]
                        report.busy += code == "busy"
                        report.errors[code] += code != "busy"
                        await asyncio.sleep(0.2)
                        continue
                    frame = await ws.recv()
                    report.first_audio_s.append(time.monotonic() - sent)
                    while not isinstance(frame, str):
                        frame = await ws.recv()
                    last = json.loads(frame)
                    report.requests += last["type"] == "synthesis_complete"
                    if last["type"] == "error":
                        report.errors[last["code"]] += 1
        except (ConnectionClosed, OSError) as error:
            report.errors[f"session lost ({type(error).__name__})"] += 1

    async def sampler() -> None:
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, StopIteration):
                rss, fds = process_usage(server_pid)
                report.samples.append((time.monotonic() - started, rss, fds))
            await asyncio.sleep(2.0)

    await asyncio.gather(sampler(), *(speaker(index) for index in range(sessions)))
    return report


# --- the whole run: `voicestream bench chaos` ------------------------------------------------

LISTENER_BUDGET_BYTES = Budgets().listener_budget_bytes
"""What the server may hold for one listener by default (`serve --listener-budget-bytes`)."""
LONG_TEXT = " ".join(f"This is sentence number {n} of a long answer." for n in range(1, 30))


async def metric(base_url: str, name: str) -> float:
    """The value of the unlabelled metric ``name`` on the server's /metrics now."""
    import httpx

    async with httpx.AsyncClient() as client:
        text = (await client.get(f"{base_url}/metrics")).text
    return float(next(line for line in text.splitlines() if line.startswith(name + " ")).split()[1])


async def until_idle(
    base_url: str, timeout_s: float, names: tuple[str, ...] = ("voicestream_queue_depth",), poll_s: float = 0.1
) -> float | None:
    """Seconds until every one of the server's unlabelled metrics ``names`` is 0 at once
    (nothing queued, by default), or None if it stays busy for ``timeout_s``. One client for
    the whole wait: httpx builds a TLS context per client, tens of milliseconds of CPU."""
    import httpx

    started = time.monotonic()
    prefixes = tuple(name + " " for name in names)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s), httpx.AsyncClient() as client:
            while any(
                line.startswith(prefixes) and float(line.split()[1])
                for line in (await client.get(f"{base_url}/metrics")).text.splitlines()
            ):
                await asyncio.sleep(poll_s)
            return time.monotonic() - started
    return None


async def fault_disconnect(base_url: str) -> str:
    """A client that hangs up mid-stream: its work is dropped."""
    async with connect(session_url(base_url), max_size=None) as ws:
        await ws.send(json.dumps({"text": LONG_TEXT, "request_id": "gone"}))
        while not isinstance(await ws.recv(), bytes):
            pass
        ws.transport.abort()
    freed = await until_idle(base_url, 20)
    return "FAILED: work left queued" if freed is None else f"ok: queue empty {freed:.1f} s after the hang-up"


async def fault_never_reads(base_url: str, server_pid: int, seconds: float = 15.0) -> str:
    """Three long requests from a client that never reads: the audio held for it stays within
    its budget (the server's own accounting), others are unaffected. The server's memory is
    reported, not judged: while it renders for the client it holds the working memory of two
    concurrent model runs (about 100 to 250 MB here), given back when they end."""
    import socket

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    host, port = base_url.removeprefix("http://").split(":")
    await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
    before = process_usage(server_pid)[0]
    async with connect(session_url(base_url), sock=sock, max_size=None, max_queue=1, compression=None) as hog:
        hog.transport.pause_reading()
        for index in range(3):
            await hog.send(json.dumps({"text": LONG_TEXT, "request_id": f"hog{index}"}))
        await asyncio.sleep(seconds)
        after = process_usage(server_pid)[0]
        held = await metric(base_url, "voicestream_buffered_audio_bytes")
        other = await run_probes(base_url, [valid_probe("other", "Other sessions still speak.")], 30)
        hog.transport.abort()
    grown = (after - before) / 1024
    verdict = "ok" if other.completed == 1 and held <= LISTENER_BUDGET_BYTES else "FAILED"
    return (f"{verdict}: audio held for it {held / 1024:,.0f} KiB (its budget {LISTENER_BUDGET_BYTES // 1024:,} KiB); "
            f"server memory {grown:+.0f} MB over {seconds:g} s; another session completed: {other.completed}")


async def _non_reader(base_url: str) -> ClientConnection:
    """A session whose client never reads (tiny receive buffer, reading paused)."""
    import socket

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    host, port = base_url.removeprefix("http://").split(":")
    await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
    hog = await connect(session_url(base_url), sock=sock, max_size=None, max_queue=1, compression=None)
    hog.transport.pause_reading()
    return hog


async def _first_audio_s(base_url: str, text: str = "How soon do I hear this?") -> float | None:
    """Seconds from sending one request to its first audio frame on a new session."""
    async with connect(session_url(base_url), max_size=None) as ws:
        started = time.monotonic()
        await ws.send(json.dumps({"text": text, "request_id": "probe"}))
        async with asyncio.timeout(120):
            while True:
                frame = await ws.recv()
                if isinstance(frame, bytes):
                    return time.monotonic() - started
                if json.loads(frame)["type"] == "error":
                    return None


async def _until_parked(base_url: str, timeout_s: float) -> float | None:
    """Seconds until the server renders nothing for a second (every request left waits for
    its client to read), or None if it is still rendering after ``timeout_s``."""
    started = time.monotonic()
    quiet = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            while quiet < 4:
                quiet = quiet + 1 if await metric(base_url, "voicestream_rendering_pieces") == 0 else 0
                await asyncio.sleep(0.25)
            return time.monotonic() - started
    return None


async def fault_many_never_read(base_url: str, server_pid: int, hogs: int = 64, seconds: float = 15.0) -> str:
    """``hogs`` sessions that each queue four long requests and never read: once they have
    stalled (each holds its share of the server's budgets and no worker), memory stays
    bounded and a session that reads is served about as fast as on an idle server (goal:
    within 2x)."""
    idle = await _first_audio_s(base_url)
    before = process_usage(server_pid)[0]
    sessions = [await _non_reader(base_url) for _ in range(hogs)]
    try:
        for hog in sessions:
            for index in range(4):
                await hog.send(json.dumps({"text": LONG_TEXT, "request_id": f"hog{index}"}))
        await asyncio.sleep(seconds)
        stalled_after = await _until_parked(base_url, 240)
        loaded = await _first_audio_s(base_url)
        grown = (process_usage(server_pid)[0] - before) / 1024
        peak = await metric(base_url, "voicestream_peak_listener_buffered_bytes") / 1024
    finally:
        for hog in sessions:
            hog.transport.abort()
    if idle is None or loaded is None:
        return f"FAILED: a reading session was refused (idle {idle}, beside the hogs {loaded})"
    verdict = "ok" if loaded <= 2 * idle and grown < 500 and stalled_after is not None else "FAILED"
    return (f"{verdict}: all stalled after {stalled_after or 0:.0f} s; server memory {grown:+.0f} MB, most held "
            f"by one session {peak:.0f} KiB; another "
            f"session's first audio {loaded * 1000:.0f} ms beside them, {idle * 1000:.0f} ms idle "
            f"({loaded / idle:.2f}x)")


ADVERSARIAL_TEXTS = ("$" * 20_000, "1" * 20_000, "a" * 20_000, "[" * 20_000, "a. " * 6_666, "-" * 20_000)
"""Texts that froze the server for seconds while its normalizer's patterns were quadratic."""


async def fault_adversarial_texts(base_url: str, server_pid: int) -> str:
    """The longest adversarial texts at once: /ping keeps answering, memory is given back."""
    import httpx

    before = process_usage(server_pid)[0]
    pinged = asyncio.Event()
    async with httpx.AsyncClient(timeout=120) as client:

        async def speak(text: str) -> int:
            async with client.stream("POST", f"{base_url}/invocations",
                                     json={"text": text, "stream": True, "format": "pcm16"}) as response:
                await pinged.wait()
                return response.status_code

        speaking = [asyncio.create_task(speak(text)) for text in ADVERSARIAL_TEXTS]
        worst = 0.0
        for _ in range(20):
            started = time.monotonic()
            await client.get(f"{base_url}/ping")
            worst = max(worst, time.monotonic() - started)
            await asyncio.sleep(0.1)
        pinged.set()
        statuses = await asyncio.gather(*speaking)
    freed = await until_idle(base_url, 60)
    grown = (process_usage(server_pid)[0] - before) / 1024
    ok = worst < 0.25 and freed is not None and all(status == 200 for status in statuses)
    return (f"{'ok' if ok else 'FAILED'}: slowest /ping {worst * 1000:.0f} ms during {len(ADVERSARIAL_TEXTS)} "
            f"texts of 20,000 characters; statuses {sorted(set(statuses))}; server memory {grown:+.0f} MB")


async def fault_sigterm(base_url: str, process: asyncio.subprocess.Process) -> str:
    """SIGTERM during synthesis: the request finishes, the session closes with 1001, exit."""
    import signal

    last: dict = {"type": "nothing"}
    async with connect(session_url(base_url), max_size=None) as ws:
        await ws.send(json.dumps({"text": SIGTERM_TEXT, "request_id": "inflight"}))
        while not isinstance(await ws.recv(), bytes):
            pass
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(ConnectionClosed):
            _, _, last = await _answer(ws)
            await asyncio.wait_for(ws.recv(), 60)
        code = ws.close_code
    exited = await asyncio.wait_for(process.wait(), 60)
    ok = last["type"] == "synthesis_complete" and code == 1001
    return f"{'ok' if ok else 'FAILED'}: in-flight request {last['type']}, close code {code}, exit status {exited}"


SIGTERM_TEXT = "This request is being spoken when the server is told to stop. It still ends."


# --- every fault on every persistent face (issue 27) -----------------------------------------

EDGE_FACES = ("session", "cartesia", "deepgram", "elevenlabs", "wyoming")
EDGE_FAULTS = ("never reads", "never speaks", "floods bad messages", "disconnects mid-answer")
EDGE_SEND_TIMEOUT_S = 5.0
EDGE_IDLE_TIMEOUT_S = 8.0
EDGE_MAX_ERRORS = 200
"""The edge server's ``--max-session-errors``: a flood of bad messages ends in a few seconds."""
SLACK_S = 2.0
"""How much later than its timeout a connection may be closed."""


@dataclass(frozen=True)
class EdgeServer:
    url: str
    wyoming_port: int

    @property
    def host(self) -> str:
        return self.url.removeprefix("http://").split(":")[0]

    def ws_url(self, face: str) -> str:
        return self.url.replace("http://", "ws://") + WS_PATHS[face]

    def port(self, face: str) -> int:
        return self.wyoming_port if face == "wyoming" else int(self.url.rsplit(":", 1)[1])


WS_PATHS = {
    "session": SESSION_PATH,
    "cartesia": "/tts/websocket",
    "deepgram": "/v1/speak?model=af_heart&encoding=linear16&sample_rate=24000",
    "elevenlabs": "/v1/text-to-speech/af_heart/multi-stream-input?output_format=pcm_24000",
}


def _request(face: str, text: str) -> list[str | bytes]:
    """The face's messages asking for ``text`` (on Wyoming: one framed ``synthesize`` event)."""
    if face == "session":
        return [json.dumps({"text": text, "request_id": "edge"})]
    if face == "cartesia":
        return [json.dumps({"context_id": "edge", "transcript": text, "voice": {"mode": "id", "id": "af_heart"},
                            "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}})]
    if face == "deepgram":
        return [json.dumps({"type": "Speak", "text": text}), json.dumps({"type": "Flush"})]
    if face == "elevenlabs":
        return [json.dumps({"text": " ", "context_id": "edge"}), json.dumps({"text": text, "context_id": "edge"}),
                json.dumps({"flush": True, "context_id": "edge"})]
    data = json.dumps({"text": text}).encode()
    return [json.dumps({"type": "synthesize", "data_length": len(data)}).encode() + b"\n" + data]


def _bad(face: str) -> str | bytes:
    return b"not json\n" if face == "wyoming" else "not json"


class EdgePeer:
    """A client of one face over a raw socket whose receive window is as small as TCP allows,
    so that a peer that stops reading backs the server up after a few hundred kilobytes."""

    def __init__(self, face: str, sock, ws: ClientConnection | None, reader: asyncio.StreamReader | None) -> None:
        self.face = face
        self.sock = sock
        self.local_port = sock.getsockname()[1]
        self.ws = ws
        self.reader = reader
        self._writer: asyncio.StreamWriter | None = None

    @classmethod
    async def open(cls, face: str, server: EdgeServer, reading: bool) -> EdgePeer:
        import socket

        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        if hasattr(socket, "TCP_MAXSEG"):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (server.host, server.port(face)))
        if face != "wyoming":
            ws = await connect(server.ws_url(face), sock=sock, max_size=None, max_queue=1, compression=None)
            if not reading:
                ws.transport.pause_reading()
            return cls(face, sock, ws, None)
        peer = cls(face, sock, None, None)
        if reading:
            peer.reader, peer._writer = await asyncio.open_connection(sock=sock)
        return peer

    def unsent_bytes(self, server_port: int) -> int | None:
        """What the server has written to this peer and the peer has not taken: the server
        side's send queue, from /proc/net/tcp (None once the connection is gone)."""
        with open("/proc/net/tcp") as table:
            for line in list(table)[1:]:
                fields = line.split()
                local, remote = (int(address.split(":")[1], 16) for address in fields[1:3])
                if (local, remote) == (server_port, self.local_port):
                    return int(fields[4].split(":")[0], 16)
        return None

    async def send(self, message: str | bytes) -> None:
        if self.ws is not None:
            await self.ws.send(message)
        elif self._writer is not None:
            self._writer.write(message if isinstance(message, bytes) else message.encode())
            await self._writer.drain()
        else:
            await asyncio.get_running_loop().sock_sendall(self.sock, message)

    async def ask(self, messages: list[str | bytes]) -> None:
        for message in messages:
            await self.send(message)

    async def first_audio(self) -> None:
        """Read answers up to the first audio (an error instead raises)."""
        if self.reader is not None:
            from wyoming.event import async_read_event

            while (event := await async_read_event(self.reader)) is not None and event.type != "audio-chunk":
                if event.type == "error":
                    raise RuntimeError(event.data)
            return
        assert self.ws is not None
        while True:
            frame = await self.ws.recv()
            if isinstance(frame, bytes):
                return
            answer = json.loads(frame)
            if answer.get("type") == "error" or answer.get("error"):
                raise RuntimeError(answer)
            if answer.get("type") == "chunk" or answer.get("audio"):
                return

    def abort(self) -> None:
        if self.ws is not None:
            self.ws.transport.abort()
        elif self._writer is not None:
            self._writer.transport.abort()
        else:
            self.sock.close()


async def _until_closed(base_url: str, timeout_s: float) -> float | None:
    """The time (monotonic) the server forgot every connection, or None if it did not."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            while await metric(base_url, "voicestream_active_sessions") != 0:
                await asyncio.sleep(0.05)
            return time.monotonic()
    return None


async def _closed_after_stall(peer: EdgePeer, server: EdgeServer, timeout_s: float) -> float | None:
    """Seconds from the last time the server's send queue to a peer that reads nothing moved
    (from then on nothing it sent left) to the server forgetting the connection; None if it
    kept it past ``timeout_s``."""
    last, changed = -1, time.monotonic()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            while await metric(server.url, "voicestream_active_sessions") != 0:
                unsent = peer.unsent_bytes(server.port(peer.face))
                if unsent is not None and unsent != last:
                    last, changed = unsent, time.monotonic()
                await asyncio.sleep(0.05)
            return time.monotonic() - changed
    return None


async def edge_first_audio_s(server: EdgeServer, face: str, trials: int = 3) -> float:
    """A new client's first audio on ``face``: the median of ``trials``, one after another."""
    return statistics.median([await _one_first_audio_s(server, face) for _ in range(trials)])


async def _one_first_audio_s(server: EdgeServer, face: str, text: str = "How soon do I hear this?") -> float:
    """Seconds from asking a new client's first request to its first audio."""
    peer = await EdgePeer.open(face, server, reading=True)
    try:
        started = time.monotonic()
        await peer.ask(_request(face, text))
        async with asyncio.timeout(120):
            await peer.first_audio()
        return time.monotonic() - started
    finally:
        peer.abort()


@dataclass
class EdgeRow:
    face: str
    fault: str
    closed_after_s: float | None
    """Seconds from when the fault could first be seen (the last byte to the peer left the
    server, the peer connected, the flood or the hang-up ended) to the server forgetting the
    connection."""
    bound_s: float
    freed: bool
    first_audio_ratio: dict[str, float]
    """Each face's first audio for a new client just after (median of three), over its first
    audio before any fault (the same)."""
    queued: float

    @property
    def ok(self) -> bool:
        return (self.closed_after_s is not None and self.closed_after_s <= self.bound_s and self.freed
                and self.queued == 0 and all(ratio <= 2 for ratio in self.first_audio_ratio.values()))


async def _apply_fault(server: EdgeServer, face: str, fault: str) -> tuple[float | None, float]:
    """Give ``fault`` to a new client of ``face``; (seconds until the server closed it, the bound)."""
    limit_s = 240.0
    if fault == "never speaks":
        peer = await EdgePeer.open(face, server, reading=False)
        since, bound = time.monotonic(), EDGE_IDLE_TIMEOUT_S + SLACK_S
    elif fault == "never reads":
        peer = await EdgePeer.open(face, server, reading=False)
        await peer.ask(_request(face, LONG_TEXT))
        closed_after = await _closed_after_stall(peer, server, limit_s)
        peer.abort()
        return closed_after, EDGE_SEND_TIMEOUT_S + SLACK_S
    elif fault == "floods bad messages":
        peer = await EdgePeer.open(face, server, reading=False)
        with contextlib.suppress(TimeoutError, ConnectionClosed, OSError):
            for _ in range(EDGE_MAX_ERRORS * 4):
                async with asyncio.timeout(EDGE_SEND_TIMEOUT_S):
                    await peer.send(_bad(face))
        since, bound = time.monotonic(), EDGE_SEND_TIMEOUT_S + SLACK_S
    else:
        peer = await EdgePeer.open(face, server, reading=True)
        await peer.ask(_request(face, LONG_TEXT))
        async with asyncio.timeout(limit_s):
            await peer.first_audio()
        peer.abort()
        since, bound = time.monotonic(), SLACK_S
    closed = await _until_closed(server.url, limit_s)
    peer.abort()
    return (None if closed is None else max(0.0, closed - since)), bound


async def edge_matrix(server: EdgeServer) -> list[EdgeRow]:
    """Every fault on every persistent face, one at a time; after each, the server's slots
    and queue, and a new client's first audio on every face against its idle first audio."""
    idle = {face: await edge_first_audio_s(server, face) for face in EDGE_FACES}
    rows = []
    for face in EDGE_FACES:
        for fault in EDGE_FAULTS:
            closed_after, bound = await _apply_fault(server, face, fault)
            freed = await _until_closed(server.url, 10) is not None
            queued_for = await until_idle(server.url, 10)
            ratios = {other: await edge_first_audio_s(server, other) / idle[other] for other in EDGE_FACES}
            queued = 0.0 if queued_for is not None else await metric(server.url, "voicestream_queue_depth")
            rows.append(EdgeRow(face, fault, closed_after, bound, freed, ratios, queued))
    return rows


def edge_table(rows: list[EdgeRow]) -> str:
    from voicestream.bench.table import markdown_table

    return markdown_table(
        ["face", "fault", "closed after s (bound)", "slots freed", "new clients' first audio vs idle", "left queued",
         "result"],
        [[row.face, row.fault, f"{row.closed_after_s:.1f} ({row.bound_s:g})" if row.closed_after_s is not None
          else f"not closed ({row.bound_s:g})", "yes" if row.freed else "NO",
          ", ".join(f"{face} {ratio:.2f}x" for face, ratio in row.first_audio_ratio.items()), f"{row.queued:g}",
          "ok" if row.ok else "FAILED"] for row in rows],
    )


@dataclass(frozen=True)
class IdleMemory:
    """The server's resident set (MB) when idle, and its two parts: anonymous memory (the
    heap, the arena, thread stacks: what a leak grows) and file pages (the shared libraries
    and files it has touched, which the kernel may drop and read again)."""

    rss_mb: float
    anon_mb: float
    file_mb: float


@dataclass(frozen=True)
class ResidentMemory:
    """The server's resident set when idle, once served and once after every fault and the soak
    (goal: after within 1.3x of before, issue 27)."""

    before: IdleMemory
    after: IdleMemory

    @property
    def ratio(self) -> float:
        return self.after.rss_mb / self.before.rss_mb


def idle_memory(pid: int) -> IdleMemory:
    """`IdleMemory` of process ``pid`` now, from /proc."""
    sizes = _status_kb(pid, "VmRSS", "RssAnon", "RssFile")
    return IdleMemory(sizes["VmRSS"] / 1024, sizes["RssAnon"] / 1024, sizes["RssFile"] / 1024)


async def until_memory_settled(base_url: str, timeout_s: float = 60.0) -> bool:
    """Whether the server's memory settled within ``timeout_s``: no model run for the idle
    release's spell, the heap handed back and the sessions renewed if memory had grown
    (``voicestream_memory_settled``, ``voicestream.engine.memory``)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            while await metric(base_url, "voicestream_memory_settled") != 1:
                await asyncio.sleep(0.2)
            return True
    return False


async def idle_resident(base_url: str, pid: int) -> IdleMemory:
    """The server's `IdleMemory` once nothing is queued and its memory has settled (after 60 s
    unsettled, as it is)."""
    await until_idle(base_url, 120.0)
    await until_memory_settled(base_url)
    return idle_memory(pid)


@dataclass
class ChaosResult:
    fuzz: list[SessionReport]
    faults: dict[str, str]
    soak: SoakReport
    edge: list[EdgeRow] = field(default_factory=list)
    memory: ResidentMemory | None = None

    def tables(self) -> str:
        from voicestream.bench.table import markdown_table

        errors: Counter[str] = Counter()
        for report in self.fuzz:
            errors.update(report.errors)
        fuzz_rows = [[
            len(self.fuzz),
            sum(r.valid_sent for r in self.fuzz) + sum(errors.values()),
            sum(r.valid_sent for r in self.fuzz),
            sum(r.completed for r in self.fuzz),
            ", ".join(f"{code} {count}" for code, count in sorted(errors.items())),
            sum(len(r.mismatches) for r in self.fuzz),
        ]]
        soak = self.soak
        first_mb, first_fds = soak.window(first=True)
        last_mb, last_fds = soak.window(first=False)
        soak_rows = [[
            soak.sessions, f"{soak.duration_s:g}", soak.requests, soak.busy,
            sum(soak.errors.values()), f"{soak.percentile(0.5) * 1000:.0f}", f"{soak.percentile(0.95) * 1000:.0f}",
            f"{first_mb:.0f} -> {last_mb:.0f}", f"{first_fds:.0f} -> {last_fds:.0f}",
        ]]
        return "\n\n".join([
            "Fuzz\n\n" + markdown_table(
                ["sessions", "messages", "valid", "synthesis_complete", "errors by code", "wrong answers"], fuzz_rows
            ),
            "Faults\n\n" + markdown_table(["fault", "result"], list(self.faults.items())),
            f"Every fault on every persistent face (--send-timeout {EDGE_SEND_TIMEOUT_S:g}, --idle-timeout "
            f"{EDGE_IDLE_TIMEOUT_S:g}, --max-session-errors {EDGE_MAX_ERRORS})\n\n" + edge_table(self.edge),
            "Soak\n\n" + markdown_table(
                ["sessions", "seconds", "requests", "busy", "other errors", "first audio p50 ms",
                 "p95 ms", "memory MB (first 30 s -> last 30 s)", "open files"], soak_rows,
            ) + ("" if not soak.errors else f"\n\nerrors: {dict(soak.errors)}"),
            *([] if self.memory is None else ["Resident memory, idle\n\n" + markdown_table(
                ["", "served once, MB", "after the faults and the soak, MB", "after / before"],
                [[part, f"{before:.0f}", f"{after:.0f}", f"{after / before:.2f}x"] for part, before, after in (
                    ("resident set", self.memory.before.rss_mb, self.memory.after.rss_mb),
                    ("of it anonymous", self.memory.before.anon_mb, self.memory.after.anon_mb),
                    ("of it file pages", self.memory.before.file_mb, self.memory.after.file_mb),
                )],
            )]),
        ])

    def as_json(self) -> dict:
        first_mb, first_fds = self.soak.window(first=True)
        last_mb, last_fds = self.soak.window(first=False)
        return {
            "fuzz": [{"valid_sent": r.valid_sent, "completed": r.completed, "errors": dict(r.errors),
                      "mismatches": r.mismatches} for r in self.fuzz],
            "faults": self.faults,
            "edge": [dataclasses.asdict(row) | {"ok": row.ok} for row in self.edge],
            "soak": {"sessions": self.soak.sessions, "duration_s": self.soak.duration_s,
                     "requests": self.soak.requests, "busy": self.soak.busy, "errors": dict(self.soak.errors),
                     "first_audio_p50_s": self.soak.percentile(0.5), "first_audio_p95_s": self.soak.percentile(0.95),
                     "memory_mb": [first_mb, last_mb], "open_files": [first_fds, last_fds],
                     "samples": self.soak.samples},
            "resident_memory_mb": None if self.memory is None else dataclasses.asdict(self.memory),
        }


async def _start_server(*args: str) -> tuple[asyncio.subprocess.Process, str]:
    """`voicestream serve` on a free 127.0.0.1 port, once its /ping answers 200."""
    import sys

    import httpx

    from voicestream.asgi import free_port

    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "voicestream.cli", "serve", "--port", str(port), "--log-level", "warning", *args,
    )
    try:
        async with asyncio.timeout(180), httpx.AsyncClient() as client:
            while True:
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get(f"{base_url}/ping")).status_code == 200:
                        return process, base_url
                if process.returncode is not None:
                    raise RuntimeError("the speech server exited while starting")
                await asyncio.sleep(0.3)
    except BaseException:
        await _stop(process)
        raise


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.kill()
        await process.wait()


async def run_edge(serve_args: list[str]) -> list[EdgeRow]:
    """The edge matrix against its own server: short send and idle timeouts, a Wyoming port."""
    from voicestream.asgi import free_port

    wyoming_port = free_port()
    process, base_url = await _start_server(
        "--send-timeout", f"{EDGE_SEND_TIMEOUT_S:g}", "--idle-timeout", f"{EDGE_IDLE_TIMEOUT_S:g}",
        "--max-session-errors", str(EDGE_MAX_ERRORS), "--wyoming-port", str(wyoming_port), *serve_args,
    )
    try:
        return await edge_matrix(EdgeServer(base_url, wyoming_port))
    finally:
        await _stop(process)


async def run_chaos(
    sessions: int, duration_s: float, fuzz_sessions: int, fuzz_messages: int, seed: int, serve_args: list[str]
) -> ChaosResult:
    """Every fault on every persistent face (a server of its own), then start `voicestream
    serve` on 127.0.0.1, fuzz it, soak it and hurt it; SIGTERM last."""
    edge = await run_edge(serve_args)
    process, base_url = await _start_server("--max-sessions", str(max(72, sessions + 8)), *serve_args)
    try:
        await _first_audio_s(base_url)
        before = await idle_resident(base_url, process.pid)
        fuzzed = await fuzz(base_url, fuzz_sessions, fuzz_messages, seed)
        faults = {
            "client disconnects mid-stream": await fault_disconnect(base_url),
            "client never reads (3 long requests)": await fault_never_reads(base_url, process.pid),
            "64 sessions never read (4 long requests each)": await fault_many_never_read(base_url, process.pid),
            "adversarial texts (20,000 characters each)": await fault_adversarial_texts(base_url, process.pid),
        }
        soaked = await soak(base_url, sessions, duration_s, process.pid)
        memory = ResidentMemory(before, await idle_resident(base_url, process.pid))
        faults["SIGTERM during synthesis"] = await fault_sigterm(base_url, process)
        return ChaosResult(fuzzed, faults, soaked, edge, memory)
    finally:
        await _stop(process)
