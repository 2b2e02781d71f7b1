"""``voicestream bench library``: an idle voicestream server against the plain library.

The same int8 model and voice, one text at a time, time to first audio: through a new
session of the voicestream server on 127.0.0.1 (first chunk on every core), through the
same server with one thread per run (what it did before thread counts followed the load),
and through kokoro-onnx's `create_stream` (its session's default threads: every core), the
library a user would otherwise pick. The three take turns on each trial, so the shared
machine's noise hits them alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from voicestream.bench.report import Chart, Report, Table, machine_context
from voicestream.bench.texts import BLOCK, ONE_SENTENCE
from voicestream.bench.transport import WS_PATH, first_audio_s
from voicestream.engine import KokoroEngine
from voicestream.server import running_server

VOICE = "af_heart"


async def _kokoro_onnx_first_audio_s(kokoro: object, text: str) -> float:
    started = time.perf_counter()
    stream = kokoro.create_stream(text, VOICE, lang="en-us")  # type: ignore[attr-defined]
    async with contextlib.aclosing(stream):
        await anext(stream)
    return time.perf_counter() - started


@contextlib.contextmanager
def _kokoro_onnx(engine: KokoroEngine) -> Iterator[object]:
    """kokoro-onnx on this engine's model file, with this engine's voice as its voices file."""
    from kokoro_onnx import Kokoro

    with tempfile.TemporaryDirectory() as folder:
        voices = Path(folder) / "voices.npz"
        np.savez(voices, **{VOICE: engine.voice_pack(VOICE)})
        yield Kokoro(str(engine.files.model_path), str(voices))


def measure_library(engine: KokoroEngine, trials: int = 5) -> Report:
    """The table of first audio per text and contender, and the ratios to kokoro-onnx."""
    single = KokoroEngine(engine.files, max_threads=1)
    texts = {"one sentence": ONE_SENTENCE, "4-sentence block": BLOCK}
    contenders = ("voicestream, every core", "voicestream, one thread", "kokoro-onnx create_stream")
    times: dict[tuple[str, str], list[float]] = {(t, c): [] for t in texts for c in contenders}
    with (
        running_server(engine) as fast_base,
        running_server(single) as single_base,
        _kokoro_onnx(engine) as kokoro,
    ):
        urls = {contenders[0]: fast_base, contenders[1]: single_base}

        async def run() -> None:
            for text in texts.values():  # warm-up: every contender once, unmeasured
                for base in urls.values():
                    await first_audio_s(base.replace("http://", "ws://") + WS_PATH, text)
                await _kokoro_onnx_first_audio_s(kokoro, text)
            for _ in range(trials):
                for name, text in texts.items():
                    for contender in contenders:
                        if contender in urls:
                            url = urls[contender].replace("http://", "ws://") + WS_PATH
                            measured = await first_audio_s(url, text)
                        else:
                            measured = await _kokoro_onnx_first_audio_s(kokoro, text)
                        times[(name, contender)].append(measured)

        asyncio.run(run())
    rows = []
    for name, text in texts.items():
        library = statistics.median(times[(name, contenders[2])])
        for contender in contenders:
            ms = [t * 1000 for t in times[(name, contender)]]
            rows.append([name, len(text), contender, statistics.median(ms), min(ms), max(ms),
                         statistics.median(ms) / (library * 1000)])
    return Report(
        "library",
        tables=[Table(
            "First audio: an idle voicestream server against kokoro-onnx's create_stream",
            ["text", "chars", "through", "median ms", "min ms", "max ms", "÷ kokoro-onnx"],
            rows,
        )],
        charts=[Chart(
            "First audio, median",
            list(texts),
            {c: [statistics.median(times[(t, c)]) * 1000 for t in texts] for c in contenders},
            ylabel="ms",
        )],
        context={**machine_context(), "trials": trials, "voice": VOICE},
    )
