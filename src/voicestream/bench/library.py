"""``voicestream bench library``: an idle voicestream server against the plain library.

The same int8 model and voice, one text at a time, time to first audio and to the first
audible sound (`voicestream.audio.FirstSound`: a player that starts at the first byte):
through a new session of the voicestream server on 127.0.0.1 (first chunk on every core,
vocoded window by window: the default), through one that renders it whole
(``serve --first-window-ms 0``, the previous release), through the same server with one thread per run (what it did before thread counts followed
the load), and through kokoro-onnx's `create_stream` (its session's default threads: every
core), the library a user would otherwise pick: the release the dev group pins, in this
process, and its current release in a Python of its own (`kokoro_onnx_worker.py` under
``uv run --with``: one venv holds one version). All take turns on each trial, so the
shared machine's noise hits them alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from voicestream.audio import FirstSound
from voicestream.bench.report import Chart, Report, Table, machine_context
from voicestream.bench.texts import BLOCK, LONE_SENTENCE, ONE_SENTENCE
from voicestream.bench.transport import first_sound, ws_url
from voicestream.engine import KokoroEngine
from voicestream.server import running_server

VOICE = "af_heart"
KOKORO_ONNX_CURRENT = "0.6.1"
"""kokoro-onnx's current release, measured beside the pinned one."""
TEXTS = {"one sentence": ONE_SENTENCE, "lone sentence, no comma": LONE_SENTENCE, "4-sentence block": BLOCK}
Timing = tuple[float | None, float | None]
"""(first audio s, first sound s) of one request."""


async def _in_process(kokoro: object, text: str) -> Timing:
    sound = None
    started = time.perf_counter()
    stream = kokoro.create_stream(text, VOICE, lang="en-us")  # type: ignore[attr-defined]
    async with contextlib.aclosing(stream):
        async for samples, rate in stream:
            sound = sound or FirstSound(rate)
            if sound.feed(time.perf_counter() - started, samples) is not None:
                break
    return (sound.first_audio_s, sound.heard_s) if sound else (None, None)


class _OtherRelease:
    """kokoro-onnx ``version`` in its own Python, timing one text per stdin line."""

    def __init__(self, version: str, model: Path, voices: Path) -> None:
        worker = Path(__file__).with_name("kokoro_onnx_worker.py")
        command = [shutil.which("uv") or "uv", "run", "--no-project", "--quiet", "--with", f"kokoro-onnx=={version}",
                   "python", str(worker), str(model), str(voices)]
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        hello = self._process.stdout.readline() if self._process.stdout else ""
        if not hello:
            self._process.wait()
            raise RuntimeError(f"`{' '.join(command[:6])}` did not start (exit {self._process.returncode})")
        self.version = json.loads(hello)["version"]

    def time(self, text: str) -> Timing:
        assert self._process.stdin and self._process.stdout
        self._process.stdin.write(json.dumps(text) + "\n")
        self._process.stdin.flush()
        answer = json.loads(self._process.stdout.readline())
        return answer["first_audio_s"], answer["first_sound_s"]

    def close(self) -> None:
        if self._process.stdin:
            self._process.stdin.close()
        self._process.wait(timeout=30)


@contextlib.contextmanager
def _kokoro_onnx(engine: KokoroEngine, notes: list[str]) -> Iterator[dict[str, object]]:
    """kokoro-onnx on this engine's model file and voice: the pinned release here, the current
    one in its own Python (left out, with a note, where uv cannot fetch it)."""
    from kokoro_onnx import Kokoro

    with tempfile.TemporaryDirectory() as folder:
        voices = Path(folder) / "voices.npz"
        np.savez(voices, **{VOICE: engine.voice_pack(VOICE)})
        pinned = f"kokoro-onnx {importlib.metadata.version('kokoro-onnx')}"
        peers: dict[str, object] = {pinned: Kokoro(str(engine.files.model_path), str(voices))}
        other = None
        if KOKORO_ONNX_CURRENT not in pinned:
            try:
                other = _OtherRelease(KOKORO_ONNX_CURRENT, engine.files.model_path, voices)
                peers[f"kokoro-onnx {other.version} (own venv)"] = other
            except (OSError, RuntimeError) as error:
                notes.append(f"kokoro-onnx {KOKORO_ONNX_CURRENT} left out: {error}")
        try:
            yield peers
        finally:
            if other is not None:
                other.close()


async def _time(contender: object, text: str) -> Timing:
    if isinstance(contender, str):
        sound = await first_sound(contender, text)
        return sound.first_audio_s, sound.heard_s
    if isinstance(contender, _OtherRelease):
        return await asyncio.to_thread(contender.time, text)
    return await _in_process(contender, text)


def _median_ms(values: list[float | None]) -> float | None:
    present = [value * 1000 for value in values if value is not None]
    return statistics.median(present) if present else None


def measure_library(engine: KokoroEngine, trials: int = 5, texts: dict[str, str] = TEXTS) -> Report:
    """The table of first audio and first sound per text and contender, and the ratios to kokoro-onnx."""
    single = KokoroEngine(engine.files, max_threads=1)
    whole = KokoroEngine(engine.files, first_window_s=0.0)
    notes: list[str] = []
    with (
        running_server(engine) as fast_base,
        running_server(whole) as whole_base,
        running_server(single) as single_base,
        _kokoro_onnx(engine, notes) as peers,
    ):
        contenders: dict[str, object] = {
            f"voicestream, every core (first window {engine.first_window_s * 1000:.0f} ms)": ws_url(fast_base),
            "voicestream, whole first piece": ws_url(whole_base),
            "voicestream, one thread": ws_url(single_base),
            **peers,
        }
        times: dict[tuple[str, str], list[Timing]] = {(t, c): [] for t in texts for c in contenders}

        async def run() -> None:
            for text in texts.values():  # warm-up: every contender once, unmeasured
                for contender in contenders.values():
                    await _time(contender, text)
            for _ in range(trials):
                for name, text in texts.items():
                    for label, contender in contenders.items():
                        times[(name, label)].append(await _time(contender, text))

        asyncio.run(run())
    peer_labels = list(peers)
    table = Table(
        "First audio and first audible sound: an idle voicestream server against kokoro-onnx's create_stream",
        ["text", "chars", "through", "first audio median ms", "first sound median ms", "first sound min ms",
         "first sound max ms", *(f"sound ÷ {label.split(' (')[0]}" for label in peer_labels)],
    )
    for name, text in texts.items():
        peer_sound = [_median_ms([t[1] for t in times[(name, label)]]) for label in peer_labels]
        for label in contenders:
            sounds = [t[1] * 1000 for t in times[(name, label)] if t[1] is not None]
            sound = statistics.median(sounds) if sounds else None
            table.add(
                name, len(text), label, _median_ms([t[0] for t in times[(name, label)]]), sound,
                min(sounds, default=None), max(sounds, default=None),
                *(sound / peer if sound and peer else None for peer in peer_sound),
            )
    table.note = "; ".join(notes)
    return Report(
        "library",
        tables=[table],
        charts=[Chart(
            "First audible sound, median",
            list(texts),
            {label: [_median_ms([t[1] for t in times[(name, label)]]) for name in texts] for label in contenders},
            ylabel="ms",
        )],
        context={**machine_context(), "trials": trials, "voice": VOICE},
    )
