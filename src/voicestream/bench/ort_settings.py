"""``voicestream bench ort``: ONNX Runtime session settings, measured one at a time.

The engine's sessions (`voicestream.engine.kokoro._session`) run with every graph
optimization, idle threads that sleep instead of spinning, the CPU arena on and shrunk
after each run. Each variant here changes exactly one of those from the shipped settings
and renders the same piece (the lone sentence's first piece, as a request's first chunk is
rendered: on one thread and on every core), with trials interleaved across the variants so
that the machine's noise falls on all of them alike. Per variant: the session's load time,
the median wall time of a run, the CPU time a run costs the process (spinning threads burn
CPU that the LLM and the other sessions need) and the ratios to the shipped settings. The
pre-optimized variant saves the fully optimized graph beside the model once (not timed)
and loads that with no further optimization: what caching it would save at start. Where
the engine's graph has its convolutions as VNNI matrix products (`voicestream.engine.conv_gemm`),
one more variant runs the model's own ``ConvInteger`` nodes: what that rewrite saves.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from voicestream.bench.report import Report, Table, machine_context, progress
from voicestream.bench.texts import LONE_SENTENCE
from voicestream.engine import KokoroEngine
from voicestream.engine.conv_gemm import exact_on_this_cpu
from voicestream.engine.graph import edit_graph, load_graph
from voicestream.engine.kokoro import max_run_threads, session_options

if TYPE_CHECKING:
    import onnxruntime as ort


@dataclass(frozen=True, slots=True)
class Variant:
    """One setting changed from the shipped ones (``change`` edits the options in place)."""

    name: str
    change: Callable[[ort.SessionOptions], None]
    shrink_arena: bool = True
    preoptimized: bool = False
    gemm_convs: bool = True
    """False: the model's own uint8 ``ConvInteger`` nodes, not the engine's VNNI matrix products."""


def _shipped(options: ort.SessionOptions) -> None:
    return None


def _spinning(options: ort.SessionOptions) -> None:
    options.add_session_config_entry("session.intra_op.allow_spinning", "1")


def _no_arena(options: ort.SessionOptions) -> None:
    options.enable_cpu_mem_arena = False


def _level(name: str) -> Callable[[ort.SessionOptions], None]:
    def change(options: ort.SessionOptions) -> None:
        import onnxruntime as ort

        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, name)

    return change


def _denormals_as_zero(options: ort.SessionOptions) -> None:
    options.add_session_config_entry("session.set_denormal_as_zero", "1")


VARIANTS = (
    Variant("shipped (all optimizations, no spinning, arena shrunk per run)", _shipped),
    Variant("threads spin while idle", _spinning),
    Variant("arena kept (no shrink after a run)", _shipped, shrink_arena=False),
    Variant("no CPU arena", _no_arena, shrink_arena=False),
    Variant("extended optimizations only", _level("ORT_ENABLE_EXTENDED")),
    Variant("basic optimizations only", _level("ORT_ENABLE_BASIC")),
    Variant("denormals as zero", _denormals_as_zero),
    Variant("pre-optimized graph loaded as is", _shipped, preoptimized=True),
    Variant("convolutions as the model's ConvInteger (uint8 x uint8)", _shipped, gemm_convs=False),
)


def _options(threads: int, variant: Variant) -> ort.SessionOptions:
    """The engine's session options with ``variant``'s one change."""
    import onnxruntime as ort

    options = session_options(threads)
    variant.change(options)
    if variant.preoptimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return options


def _preoptimized_model(model: str | bytes, folder: Path) -> str:
    """The fully optimized graph, saved once (what a cache beside the model would hold)."""
    import onnxruntime as ort

    path = folder / "kokoro.optimized.onnx"
    options = _options(1, VARIANTS[0])
    options.optimized_model_filepath = str(path)
    ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return str(path)


@dataclass
class _Contender:
    variant: Variant
    threads: int
    session: ort.InferenceSession
    run_options: ort.RunOptions | None
    load_s: float
    walls: list[float]
    cpus: list[float]


def _run_options(shrink: bool) -> ort.RunOptions | None:
    import onnxruntime as ort

    if not shrink:
        return None
    options = ort.RunOptions()
    options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return options


def measure_ort_settings(engine: KokoroEngine, trials: int = 5, voice: str = "af_heart") -> Report:
    """Each variant on one thread and on every core, ``trials`` interleaved runs each."""
    import onnxruntime as ort

    context = machine_context()
    graph = load_graph(engine.files.model_path)
    piece = next(engine.plan(LONE_SENTENCE, engine.language_for(voice)))
    feed = engine.model_inputs(piece, voice, 1.0)
    if feed is None:
        raise ValueError(f"{LONE_SENTENCE!r} has no speakable token")
    thread_counts = sorted({1, max_run_threads()})
    models = {True: graph.model}
    if exact_on_this_cpu():  # elsewhere the engine's graph already runs the model's ConvInteger
        models[False] = edit_graph(engine.files.model_path, gemm_convs=False).model
    variants = [variant for variant in VARIANTS if variant.gemm_convs in models]
    contenders: list[_Contender] = []
    with tempfile.TemporaryDirectory(prefix="voicestream-ort-") as folder:
        optimized = _preoptimized_model(graph.model, Path(folder))
        runs = len(variants) * len(thread_counts) * (trials + 2)
        with progress("bench ort", runs) as advance:
            for threads in thread_counts:
                for variant in variants:
                    started = time.perf_counter()
                    session = ort.InferenceSession(
                        optimized if variant.preoptimized else models[variant.gemm_convs],
                        _options(threads, variant),
                        providers=["CPUExecutionProvider"],
                    )
                    load_s = time.perf_counter() - started
                    contender = _Contender(variant, threads, session, _run_options(variant.shrink_arena), load_s, [], [])
                    session.run(None, feed, contender.run_options)  # warm-up, not timed
                    advance()
                    contenders.append(contender)
            for _ in range(trials + 1):  # one more round: the first is a second warm-up
                for contender in contenders:
                    wall, cpu = time.perf_counter(), time.process_time()
                    contender.session.run(None, feed, contender.run_options)
                    contender.walls.append(time.perf_counter() - wall)
                    contender.cpus.append(time.process_time() - cpu)
                    advance()
    return _report(contenders, trials, voice, context)


def _report(contenders: list[_Contender], trials: int, voice: str, context: dict[str, object]) -> Report:
    table = Table(
        "ONNX Runtime session settings, one change at a time: the lone sentence's first piece",
        ["setting", "threads", "load s", "run ms (median)", "run ms (best)", "CPU ms per run", "run ÷ shipped",
         "CPU ÷ shipped"],
    )
    shipped = {c.threads: c for c in contenders if c.variant is VARIANTS[0]}
    for contender in contenders:
        walls, cpus = contender.walls[1:], contender.cpus[1:]
        base = shipped[contender.threads]
        table.add(
            contender.variant.name,
            contender.threads,
            contender.load_s,
            statistics.median(walls) * 1000,
            min(walls) * 1000,
            statistics.median(cpus) * 1000,
            statistics.median(walls) / statistics.median(base.walls[1:]),
            statistics.median(cpus) / statistics.median(base.cpus[1:]),
        )
    return Report(
        "ort",
        tables=[table],
        context={**context, "voice": voice, "trials": trials, "text": LONE_SENTENCE},
        notes=["Trials interleaved across the variants; one untimed warm-up run each, and the first timed round dropped."],
    )
