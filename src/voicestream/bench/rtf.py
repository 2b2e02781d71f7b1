"""``voicestream bench rtf``: the engine's real-time factor by input length and thread count.

RTF = synthesis time / audio time (lower is faster; under 1 keeps up with playback).
Each thread count gets its own engine over the same weights (``max_threads``), and every
model run of it uses that many threads; all are measured in the same run. fp32 and fp16
on the CUDA provider are measured only where onnxruntime has a CUDA provider and those
weights can be had; otherwise the report says they were skipped.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from voicestream.bench.report import Advance, Chart, Report, Table, machine_context, progress
from voicestream.bench.texts import RTF_INPUTS
from voicestream.engine import EngineError, KokoroEngine, ModelFiles, offline

GPU_VARIANTS = ("fp32", "fp16")


def engine_with_threads(files: ModelFiles, threads: int) -> KokoroEngine:
    """An engine whose every run uses ``threads`` intra-op threads (its own ONNX Runtime session)."""
    engine = KokoroEngine(files, max_threads=threads)
    offline.synthesize(engine, "Warm up.")
    return engine


def _time_input(engine: KokoroEngine, text: str, voice: str) -> tuple[float, float, float]:
    """(seconds to the first chunk, total seconds, audio seconds) of one synthesis."""
    started = time.perf_counter()
    first = None
    samples = 0
    for rendered in offline.stream(engine, text, voice, threads=engine.max_threads):
        first = first if first is not None else time.perf_counter() - started
        samples += rendered.audio.size
    elapsed = time.perf_counter() - started
    return first or elapsed, elapsed, samples / engine.sample_rate


def _measure_engine(
    engine: KokoroEngine, label: str, inputs: dict[str, str], trials: int, voice: str, table: Table, advance: Advance
) -> list[float]:
    """Add one row per input to ``table``; return the median RTF of each input."""
    medians = []
    for name, text in inputs.items():
        firsts, rtfs, audio_s = [], [], 0.0
        for _ in range(trials):
            first, elapsed, audio_s = _time_input(engine, text, voice)
            firsts.append(first)
            rtfs.append(elapsed / audio_s)
            advance()
        medians.append(statistics.median(rtfs))
        table.add(name, len(text), label, audio_s, statistics.median(firsts) * 1000, medians[-1], min(rtfs))
    return medians


def _gpu_engines(model_dir: Path | None) -> tuple[list[tuple[str, KokoroEngine]], str]:
    """CUDA engines for fp32 and fp16, and a note on what was measured or why not."""
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return [], "fp32/fp16 on CUDA: skipped (this onnxruntime has no CUDAExecutionProvider: no GPU here)."
    engines, skipped = [], []
    for variant in GPU_VARIANTS:
        try:
            engine = KokoroEngine.load(model_dir, device="cuda", variant=variant)
        except EngineError as error:
            skipped.append(f"{variant} ({error.message})")
            continue
        engines.append((f"cuda {variant}", engine))
    return engines, f"fp32/fp16 on CUDA: skipped {', '.join(skipped)}." if skipped else ""


def measure_rtf(
    files: ModelFiles,
    thread_counts: Sequence[int] = (1, 2),
    trials: int = 3,
    voice: str = "af_heart",
    inputs: dict[str, str] = RTF_INPUTS,
    model_dir: Path | None = None,
) -> Report:
    """Synthesize each input ``trials`` times per thread count (then per GPU variant, if any)."""
    table = Table(
        "Engine real-time factor by input length and thread count",
        ["input", "chars", "run on", "audio s", "first chunk ms (median)", "RTF median", "RTF best"],
    )
    context = machine_context()
    gpu_engines, gpu_note = _gpu_engines(model_dir)
    runs = len(inputs) * trials * (len(thread_counts) + len(gpu_engines))
    series: dict[str, list[float | None]] = {}
    with progress("bench rtf", runs) as advance:
        for threads in thread_counts:
            label = f"cpu, {threads} thread{'s' if threads > 1 else ''}"
            engine = engine_with_threads(files, threads)
            series[label] = list(_measure_engine(engine, label, inputs, trials, voice, table, advance))
        for label, engine in gpu_engines:
            series[label] = list(_measure_engine(engine, label, inputs, trials, voice, table, advance))
    lengths: list[str | int | float] = [len(text) for text in inputs.values()]
    report = Report(
        "rtf",
        tables=[table],
        charts=[Chart("Real-time factor (lower is faster)", lengths, series, "RTF", "input characters", kind="line")],
        context={**context, "model": files.model_path.name, "voice": voice, "trials": trials},
    )
    if gpu_note:
        report.notes.append(gpu_note)
    return report
