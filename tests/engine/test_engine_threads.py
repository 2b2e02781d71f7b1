"""Thread counts per model run: a many-threaded session beside the single-threaded one,
parallel rendering of long texts in order, and the scheduler's choice of threads."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from voicestream.cpus import CPU_USE, available_cpus
from voicestream.engine import KokoroEngine
from voicestream.engine.kokoro import max_run_threads, split_sentences
from voicestream.engine.offline import render_whole, stream, stream_parallel
from voicestream.speech.scheduler import Listener, SynthesisJob, SynthesisScheduler

SENTENCES = "The first sentence is short. A second one follows it. And a third closes the text."


def test_threads_default_to_every_available_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VOICESTREAM_THREADS", raising=False)
    assert max_run_threads() == available_cpus()
    monkeypatch.setenv("VOICESTREAM_THREADS", "3")
    assert max_run_threads() == 3


def test_many_threads_render_the_same_audio(engine: KokoroEngine) -> None:
    piece = next(engine.plan("Hello there, this is one piece."))
    single = render_whole(engine, piece, "af_heart", 1.0, threads=1).audio
    many = render_whole(engine, piece, "af_heart", 1.0, threads=engine.max_threads).audio
    assert abs(single.size - many.size) <= 0.01 * single.size
    n = min(single.size, many.size)
    assert np.corrcoef(single[:n], many[:n])[0, 1] > 0.95


def test_parallel_stream_keeps_the_order(engine: KokoroEngine) -> None:
    in_order = [rendered.audio for rendered in stream(engine, SENTENCES, "af_heart")]
    done: list[int] = []
    parallel = list(stream_parallel(engine, SENTENCES, "af_heart", progress=done.append))
    assert [chunk.size for chunk in parallel] == pytest.approx([chunk.size for chunk in in_order], rel=0.01)
    assert done == [len(sentence) for sentence in split_sentences(SENTENCES)]


class ThreadRecorder:
    """The real engine, recording the thread count of each run."""

    def __init__(self, engine: KokoroEngine) -> None:
        self._engine = engine
        self.runs: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def render_parts(self, piece: Any, voice: str, speed: float, threads: int = 1) -> Any:
        self.runs.append(threads)
        return self._engine.render_parts(piece, voice, speed, threads)


async def speak(scheduler: SynthesisScheduler, text: str) -> None:
    job = scheduler.submit(SynthesisJob(text, "af_heart", 1.0, Listener()))
    async with asyncio.timeout(60):
        async for _ in job.audio():
            pass


async def test_first_audio_gets_every_core_unless_another_first_chunk_holds_them(engine: KokoroEngine) -> None:
    if engine.max_threads < 2:
        pytest.skip("one core: every run is single-threaded")
    recorder = ThreadRecorder(engine)
    scheduler = SynthesisScheduler(recorder, workers=2)  # type: ignore[arg-type]
    for threads in (1, engine.max_threads):  # renders predicted instant: a playing listener has slack in hand
        scheduler.pace.record(1, 1.0, threads, 1e-6)
    scheduler.start()
    try:
        await speak(scheduler, "Idle server. Then a second sentence.")
        assert recorder.runs == [engine.max_threads, 1]  # silent: every core; slack in hand: one (ranked)
        recorder.runs.clear()
        with CPU_USE.holding(1):  # a local LLM generating in this process: it runs niced
            await speak(scheduler, "Beside an LLM.")
        assert recorder.runs == [engine.max_threads]
        recorder.runs.clear()
        with CPU_USE.claim_urgent(engine.max_threads):  # another first chunk rendering
            await speak(scheduler, "Busy server.")
        assert recorder.runs == [1]
    finally:
        await scheduler.stop()
