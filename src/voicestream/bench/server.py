"""``voicestream bench server``: time to first audio byte over the real server on 127.0.0.1.

Each figure is measured side by side in one run (this machine is shared and noisy), from
the moment a request leaves the client to the moment its first audio frame arrives.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time

from websockets.asyncio.client import connect

from voicestream.bench.table import markdown_table
from voicestream.bench.texts import BLOCK, FIRST_SENTENCE, MONOLOGUE, REFERENCE_SENTENCES
from voicestream.engine import KokoroEngine
from voicestream.server import running_server

WS_PATH = "/invocations-bidirectional-stream"


async def first_audio_s(url: str, text: str) -> float:
    """A new session, one request; seconds until its first audio frame (the rest is cancelled)."""
    async with connect(url) as ws:
        sent = time.monotonic()
        await ws.send(json.dumps({"text": text, "request_id": "bench"}))
        while not isinstance(await ws.recv(), bytes):
            pass
        arrived = time.monotonic() - sent
        await ws.send(json.dumps({"type": "cancel"}))
        return arrived


def _engine_first_chunk_s(engine: KokoroEngine, text: str) -> float:
    started = time.perf_counter()
    next(iter(engine.stream(text)))
    return time.perf_counter() - started


async def _three_sentences(url: str) -> list[list[object]]:
    rows: list[list[object]] = []
    async with connect(url) as ws:
        for index, (text, _, _) in enumerate(REFERENCE_SENTENCES):
            await ws.send(json.dumps({"text": text, "request_id": f"s{index}"}))
        received = 0
        while len(rows) < len(REFERENCE_SENTENCES):
            frame = await ws.recv()
            if isinstance(frame, bytes):
                received += len(frame)
                continue
            message = json.loads(frame)
            if message["type"] == "synthesis_complete":
                text, ref_bytes, ref_s = REFERENCE_SENTENCES[len(rows)]
                rows.append([text, ref_bytes, ref_s, received, message["total_duration_s"]])
                received = 0
    return rows


async def _monologue(url: str, started: asyncio.Event) -> None:
    async with connect(url) as ws:
        await ws.send(json.dumps({"text": MONOLOGUE}))
        while True:
            if isinstance(await ws.recv(), bytes):
                started.set()


async def first_audio_beside_monologues(url: str, trials: int) -> tuple[list[float], list[float]]:
    """Seconds to first audio of 'Hello there.' on an idle server, then beside 3 long monologues."""
    idle = [await first_audio_s(url, "Hello there.") for _ in range(trials)]
    events = [asyncio.Event() for _ in range(3)]
    tasks = [asyncio.create_task(_monologue(url, event)) for event in events]
    try:
        for event in events:
            await event.wait()
        busy = []
        for _ in range(trials):
            busy.append(await first_audio_s(url, "Hello there."))
            await asyncio.sleep(0.3)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return idle, busy


def _stats(values: list[float]) -> list[float]:
    ms = [v * 1000 for v in values]
    return [statistics.mean(ms), statistics.median(ms), min(ms), max(ms)]


async def _measure(url: str, engine: KokoroEngine, trials: int) -> str:
    block, first, bare = [], [], []
    for _ in range(trials):  # interleaved so that noise hits every column alike
        first.append(await first_audio_s(url, FIRST_SENTENCE))
        block.append(await first_audio_s(url, BLOCK))
        bare.append(await asyncio.to_thread(_engine_first_chunk_s, engine, FIRST_SENTENCE))
    ratio = statistics.mean(block) / statistics.mean(first)
    ttfa = markdown_table(
        ["request", "chars", "mean ms", "median ms", "min ms", "max ms"],
        [
            [f"first sentence alone ({trials} trials)", len(FIRST_SENTENCE), *_stats(first)],
            [f"4-sentence block ({trials} trials)", len(BLOCK), *_stats(block)],
            [f"bare engine, first sentence ({trials} trials)", len(FIRST_SENTENCE), *_stats(bare)],
        ],
    )
    overhead_ms = (statistics.median(first) - statistics.median(bare)) * 1000
    sentences = markdown_table(
        ["sentence", "reference bytes", "reference s", "voicestream bytes", "voicestream s"],
        await _three_sentences(url),
    )
    idle, busy = await first_audio_beside_monologues(url, trials)
    contention = markdown_table(
        ["'Hello there.' on a new session", "mean ms", "median ms", "min ms", "max ms"],
        [["idle server", *_stats(idle)], ["beside 3 long monologues", *_stats(busy)]],
    )
    return (
        f"## Time to first audio byte: block vs first sentence\n\n{ttfa}\n\n"
        f"block / first sentence (means): {ratio:.3f} (reference: 329.3 / 156.7 = 2.101)\n"
        f"server overhead over the bare engine (medians): {overhead_ms:.1f} ms\n\n"
        f"## Three sentences on one live session\n\n{sentences}\n\n"
        f"## First audio beside three long monologues\n\n{contention}\n\n"
        f"busy / idle (medians): {statistics.median(busy) / statistics.median(idle):.2f}\n"
    )


def measure_server(engine: KokoroEngine, trials: int = 5) -> str:
    """Start a real server on 127.0.0.1 with ``engine`` and measure it; returns the report."""
    with running_server(engine) as base:
        url = base.replace("http://", "ws://") + WS_PATH
        return asyncio.run(_measure(url, engine, trials))
