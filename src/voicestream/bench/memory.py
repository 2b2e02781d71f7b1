"""``voicestream bench memory``: a speech server's memory before a load, at its peak, after it,
and after an idle spell, with and without the engine's idle release (`voicestream.engine.memory`).

Each configuration is a `voicestream serve` process on 127.0.0.1 (its environment is what
differs), and every one gets the same load at the same time, so that the machine's noise is
theirs alike: sessions speaking texts of every length from one sentence to a monologue,
fuzzed sessions (bad messages among short texts) and the adversarial texts of
`voicestream bench chaos`. Memory is the process's resident set, read from /proc. The render
time the release costs is the first request after an idle spell (the release has run, and
the next runs fault their pages in again), the configurations taking turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from websockets.asyncio.client import connect

from voicestream.bench.chaos import (
    LONG_TEXT,
    fault_adversarial_texts,
    fuzz,
    metric,
    run_probes,
    session_url,
    until_memory_settled,
    valid_probe,
)
from voicestream.bench.report import Report, Table, machine_context
from voicestream.bench.texts import BLOCK, LATENCY_ANSWER, LOAD_TEXT, MONOLOGUE, RTF_INPUTS
from voicestream.engine.memory import DEFAULT_RENEW_ABOVE
from voicestream.speech.settings import RELEASE_AFTER_ENV, RENEW_ABOVE_ENV

LOAD_TEXTS = (*RTF_INPUTS.values(), BLOCK, LATENCY_ANSWER, LOAD_TEXT, MONOLOGUE, LONG_TEXT)
"""From 12 to about 1,300 characters: ONNX Runtime and malloc see many input lengths."""
PROBE_TEXT = RTF_INPUTS["medium"]
CONFIGURATIONS = {
    f"as shipped (release; sessions renewed above {DEFAULT_RENEW_ABOVE:g}x)": {},
    "release, no renewal": {RENEW_ABOVE_ENV: "0"},
    "idle release off": {RELEASE_AFTER_ENV: "0"},
}
"""What a renewal costs shows in the first timed request: the load's runs at once make the
shipped server renew its sessions in the idle spell after it, so that request runs on sessions
just built (the later ones follow a single request's runs, which renew nothing)."""
SAMPLE_EVERY_S = 0.5


@dataclass
class Server:
    """One `voicestream serve` process and what was measured of it."""

    label: str
    process: asyncio.subprocess.Process
    base_url: str
    idle_mb: float = 0.0
    peak_mb: float = 0.0
    loaded_mb: float = 0.0
    rested_mb: float = 0.0
    completed: int = 0
    renewals: int = 0
    """Times the server renewed its model sessions (``voicestream_session_renewals``), all told."""
    sent: int = 0
    failures: list[str] = field(default_factory=list)
    """What went wrong with the load's requests (an error code, or the mismatch)."""
    first_audio_s: list[float] = field(default_factory=list)
    request_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    """The server's CPU time (user and system) for each timed request."""
    page_faults: list[int] = field(default_factory=list)
    """The server's minor page faults during each timed request: memory touched anew."""


def resident_mb(pid: int) -> float:
    """The process's resident set (VmRSS), in MB."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


def cpu_and_faults(pid: int) -> tuple[float, int]:
    """The process's CPU seconds so far (user and system) and its minor page faults, from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()  # from the third field on: the name may hold spaces
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks, int(fields[7])


@contextlib.asynccontextmanager
async def serving(label: str, env: dict[str, str], serve_args: Sequence[str]) -> AsyncIterator[Server]:
    """`voicestream serve` with ``env`` added to this process's environment, once it answers /ping."""
    import httpx

    from voicestream.asgi import free_port

    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "voicestream.cli", "serve", "--port", str(port), "--log-level", "warning",
        *serve_args, env={**os.environ, **env},
    )
    server = Server(label, process, f"http://127.0.0.1:{port}")
    try:
        async with asyncio.timeout(300), httpx.AsyncClient() as client:
            while process.returncode is None:
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get(f"{server.base_url}/ping")).status_code == 200:
                        break
                await asyncio.sleep(0.3)
        if process.returncode is not None:
            raise RuntimeError(f"the speech server ({label}) exited while starting")
        yield server
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def _speak(server: Server, texts: Sequence[str], prefix: str) -> None:
    """A client speaking ``texts``, each once the one before has ended (a closed loop: on a
    slow machine a queue of long texts would go stale); counts what completed."""
    for index, text in enumerate(texts):
        report = await run_probes(server.base_url, [valid_probe(f"{prefix}-{index}", text)], 900)
        server.sent += report.valid_sent
        server.completed += report.completed
        server.failures += [f"{code} x{count}" for code, count in report.errors.items()] + report.mismatches


async def _load(server: Server, sessions: int, rounds: int, adversarial: bool, seed: int) -> None:
    """Sessions speaking texts of every length, fuzzed sessions, then the adversarial texts;
    the resident set sampled all along (its highest is the peak)."""

    async def sample() -> None:
        while True:
            server.peak_mb = max(server.peak_mb, resident_mb(server.process.pid))
            await asyncio.sleep(SAMPLE_EVERY_S)

    sampler = asyncio.create_task(sample())
    try:
        plans = [[LOAD_TEXTS[(s + r) % len(LOAD_TEXTS)] for r in range(rounds)] for s in range(sessions)]
        await asyncio.gather(
            *(_speak(server, plan, f"s{index}") for index, plan in enumerate(plans)),
            fuzz(server.base_url, 2, 12, seed),
        )
        if adversarial:
            await fault_adversarial_texts(server.base_url, server.process.pid)
    finally:
        sampler.cancel()
        await asyncio.gather(sampler, return_exceptions=True)
    server.peak_mb = max(server.peak_mb, resident_mb(server.process.pid))


async def _timed_request(server: Server, text: str) -> None:
    """One request on a new session: seconds to its first audio and to its end."""
    cpu, faults = cpu_and_faults(server.process.pid)
    async with connect(session_url(server.base_url), max_size=None) as ws:
        started, first = time.monotonic(), None
        await ws.send(json.dumps({"text": text, "request_id": "probe"}))
        async with asyncio.timeout(120):
            while True:
                frame = await ws.recv()
                if isinstance(frame, bytes):
                    first = first or time.monotonic() - started
                elif json.loads(frame)["type"] != "synthesis_start":
                    break
        if first is None or json.loads(frame)["type"] != "synthesis_complete":
            raise RuntimeError(f"the timed request failed on {server.label}: {frame}")
        server.first_audio_s.append(first)
        server.request_s.append(time.monotonic() - started)
    cpu_after, faults_after = cpu_and_faults(server.process.pid)
    server.cpu_s.append(cpu_after - cpu)
    server.page_faults.append(faults_after - faults)


async def _measure(
    configurations: dict[str, dict[str, str]], sessions: int, rounds: int, idle_s: float, trials: int,
    adversarial: bool, seed: int, serve_args: Sequence[str],
) -> list[Server]:
    async with contextlib.AsyncExitStack() as stack:
        servers = [await stack.enter_async_context(serving(label, env, serve_args))
                   for label, env in configurations.items()]
        for server in servers:  # every kind of run once (first pieces windowed, later ones whole)
            await _speak(server, [RTF_INPUTS["short"], RTF_INPUTS["long"]], "warm")
        await asyncio.sleep(idle_s)
        for server in servers:
            server.idle_mb = resident_mb(server.process.pid)
        await asyncio.gather(*(_load(server, sessions, rounds, adversarial, seed) for server in servers))
        for server in servers:
            server.loaded_mb = resident_mb(server.process.pid)
        await asyncio.sleep(idle_s)
        for server in servers:
            await until_memory_settled(server.base_url)
            server.rested_mb = resident_mb(server.process.pid)
        for _ in range(trials):  # in turn: the one timed runs alone
            for server in servers:
                await until_memory_settled(server.base_url)
                await _timed_request(server, PROBE_TEXT)
        for server in servers:
            await until_memory_settled(server.base_url)
            server.renewals = int(await metric(server.base_url, "voicestream_session_renewals"))
        return servers


def measure_memory(
    sessions: int = 4, rounds: int = 3, idle_s: float = 10.0, trials: int = 5, adversarial: bool = True, seed: int = 1,
    serve_args: Sequence[str] = (), configurations: dict[str, dict[str, str]] = CONFIGURATIONS,
) -> Report:
    """Run every configuration's server through the same load at once; one row each."""
    context = machine_context()
    servers = asyncio.run(_measure(configurations, sessions, rounds, idle_s, trials, adversarial, seed, serve_args))
    memory = Table(
        "Speech server memory before and after a load (resident set, MB)",
        ["server", "idle after warm-up", "peak during the load", "right after the load", f"after {idle_s:g} s idle, then settled",
         "after idle / before", "requests completed"],
        note=(f"Load: {sessions} clients speaking {rounds} texts each, one after another (12 to {max(map(len, LOAD_TEXTS)):,} "
              "characters), 2 fuzzed sessions of 12 messages" + (", the 6 adversarial texts of bench chaos" if
                                                                  adversarial else "") + ", every server at once."),
    )
    cost = Table(
        "The first request after an idle spell (the idle release, and a renewal where due, has run)",
        ["server", "first audio ms (median)", "whole request ms (median)", "server CPU ms (median)",
         "minor page faults (median)", "trials", "first trial: first audio ms, server CPU ms", "session renewals, all told"],
        note=f"{len(PROBE_TEXT)} characters, on a new session once the server's memory settled after its last "
             "run (voicestream_memory_settled); the servers take turns.",
    )
    for server in servers:
        memory.add(server.label, server.idle_mb, server.peak_mb, server.loaded_mb, server.rested_mb,
                   server.rested_mb / server.idle_mb, f"{server.completed} of {server.sent}")
        cost.add(server.label, statistics.median(server.first_audio_s) * 1000,
                 statistics.median(server.request_s) * 1000, statistics.median(server.cpu_s) * 1000,
                 int(statistics.median(server.page_faults)), len(server.request_s),
                 f"{server.first_audio_s[0] * 1000:,.0f}, {server.cpu_s[0] * 1000:,.0f}", server.renewals)
    report = Report("memory", tables=[memory, cost], context={
        **context, "sessions": sessions, "rounds": rounds, "idle_s": idle_s, "trials": trials,
        "environment": {label: env for label, env in configurations.items()},
    })
    report.notes += [f"{server.label}: {', '.join(server.failures[:5])}" for server in servers if server.failures]
    return report
