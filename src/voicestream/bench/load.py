"""``voicestream bench load``: a closed-loop ladder of concurrent sessions against one server.

At each step N sessions connect at once, and each speaks the same multi-sentence reply
``rounds`` times, sending the next request as soon as the previous one is complete (a
closed loop: the load is what N conversations produce, never more). Per request: time to
first audio byte, and its real-time factor as the client sees it (request wall time /
audio seconds). Per step: p50 and p95 of both, errors and ``busy`` answers. The
capacity is the highest step whose p95 first audio stays under the stated target; the
reference sized its GPU instances the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, WebSocketException

from voicestream.audio import FirstSound, pcm16_to_float
from voicestream.bench.report import Advance, Chart, Report, Table, machine_context, progress
from voicestream.bench.stats import percentile
from voicestream.bench.texts import LOAD_TEXT
from voicestream.bench.transport import PCM16_BYTES_PER_S, SAMPLE_RATE, ws_url
from voicestream.engine import KokoroEngine
from voicestream.server import ServerSettings, free_port, running_server

LADDER = (1, 2, 4, 8, 16)
DEFAULT_TARGET_MS = 2000.0
"""p95 first audio a caller accepts as a natural pause before an answer, on this CPU."""
REQUEST_TIMEOUT_S = 180.0
STEP_PAUSE_S = 0.5
"""Between steps, so that the server has released the previous step's sessions."""


@dataclass
class StepResult:
    sessions: int
    first_audio_s: list[float] = field(default_factory=list)
    first_sound_s: list[float] = field(default_factory=list)
    """Per request with audible audio, when a player starting at its first byte first sounds."""
    rtf: list[float] = field(default_factory=list)
    errors: int = 0
    busy: int = 0
    wall_s: float = 0.0
    audio_s: float = 0.0


async def _request(ws, text: str, request_id: str, step: StepResult) -> bool:
    """One request to its end; False if it was refused (the session then stops, as a caller would)."""
    sent = time.monotonic()
    with contextlib.suppress(ConnectionClosed):  # refused at once: the busy frame is still there to read
        await ws.send(json.dumps({"text": text, "request_id": request_id}))
    first, audio_bytes = None, 0
    sound = FirstSound(SAMPLE_RATE)
    while True:
        frame = await ws.recv()
        if isinstance(frame, bytes):
            first = first if first is not None else time.monotonic() - sent
            audio_bytes += len(frame)
            if sound.heard_s is None:
                sound.feed(time.monotonic() - sent, pcm16_to_float(frame))
            continue
        message = json.loads(frame)
        if message["type"] == "error":
            step.busy += message.get("code") == "busy"
            step.errors += message.get("code") != "busy"
            return False
        if message["type"] == "synthesis_complete":
            break
    audio_s = audio_bytes / PCM16_BYTES_PER_S
    step.first_audio_s.append(first if first is not None else time.monotonic() - sent)
    if sound.heard_s is not None:
        step.first_sound_s.append(sound.heard_s)
    step.rtf.append((time.monotonic() - sent) / max(audio_s, 1e-9))
    step.audio_s += audio_s
    return True


async def _session(url: str, text: str, rounds: int, index: int, step: StepResult, advance: Advance) -> None:
    try:
        async with connect(url, max_size=None) as ws:
            for round_ in range(rounds):
                async with asyncio.timeout(REQUEST_TIMEOUT_S):
                    answered = await _request(ws, text, f"s{index}r{round_}", step)
                advance(1 if answered else rounds - round_)
                if not answered:
                    return
    except (OSError, TimeoutError, WebSocketException):
        step.errors += 1


async def run_step(url: str, sessions: int, text: str, rounds: int, advance: Advance) -> StepResult:
    step = StepResult(sessions)
    started = time.monotonic()
    await asyncio.gather(*(_session(url, text, rounds, index, step, advance) for index in range(sessions)))
    step.wall_s = time.monotonic() - started
    return step


def ms_at(seconds: Sequence[float], fraction: float) -> float | None:
    """The ``fraction`` percentile of ``seconds`` in ms (0.5: the median); None when nothing was measured."""
    return percentile(seconds, fraction) * 1000 if seconds else None


def _report(steps: list[StepResult], target_ms: float, text: str, rounds: int) -> Report:
    table = Table(
        f"Closed-loop load: N sessions each speaking a {len(text)}-character reply {rounds} times",
        ["sessions", "requests", "p50 first audio ms", "p95 first audio ms", "p50 first sound ms",
         "p95 first sound ms", "RTF median", "audio s per s", "errors", "busy", f"p95 under {target_ms:,.0f} ms"],
    )
    for step in steps:
        p95 = ms_at(step.first_audio_s, 0.95)
        table.add(
            step.sessions, len(step.first_audio_s), ms_at(step.first_audio_s, 0.5), p95,
            ms_at(step.first_sound_s, 0.5), ms_at(step.first_sound_s, 0.95),
            statistics.median(step.rtf) if step.rtf else None, step.audio_s / step.wall_s, step.errors, step.busy,
            p95 is not None and p95 < target_ms and step.errors == 0 and step.busy == 0,
        )
    passing = [step.sessions for step, row in zip(steps, table.rows, strict=True) if row[-1]]
    capacity = max(passing, default=0)
    table.note = (
        f"capacity at p95 first audio under {target_ms:,.0f} ms: {capacity} concurrent sessions "
        "(reference, ml.g5.xlarge GPU: p95 65 ms at concurrency 1, about 50 sessions per instance)"
    )
    sessions: list[str | int | float] = [step.sessions for step in steps]
    chart = Chart(
        "First audio byte under load", sessions,
        {"p50": table.column("p50 first audio ms"), "p95": table.column("p95 first audio ms"),  # type: ignore[dict-item]
         "target": [target_ms] * len(steps)},
        "ms", "concurrent sessions", kind="line",
    )
    return Report("load", [table], [chart], context={"capacity_sessions": capacity, "target_p95_ms": target_ms})


def measure_load(
    engine: KokoroEngine,
    ladder: Sequence[int] = LADDER,
    rounds: int = 2,
    target_ms: float = DEFAULT_TARGET_MS,
    text: str = LOAD_TEXT,
    max_sessions: int = 64,
) -> Report:
    """Run the ladder against a real server on 127.0.0.1 sharing ``engine``."""
    settings = ServerSettings(host="127.0.0.1", port=free_port(), max_sessions=max_sessions)
    context = machine_context()
    steps: list[StepResult] = []
    with running_server(engine, settings) as base, progress("bench load", sum(ladder) * rounds) as advance:
        for sessions in ladder:
            steps.append(asyncio.run(run_step(ws_url(base), sessions, text, rounds, advance)))
            time.sleep(STEP_PAUSE_S)
    report = _report(steps, target_ms, text, rounds)
    report.context = {**context, "rounds": rounds, "max_sessions": max_sessions, **report.context}
    return report
