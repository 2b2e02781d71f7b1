"""``voicestream bench gpu``: fp16 and fp32 on CUDA, in one command that fits a lent machine.

For each model variant: where its nodes run (ONNX Runtime's profiler names the provider of
every node it ran, so a quantized op that CUDA lacks shows up on the CPU), the bare engine's
real-time factor, the windowed path (a long first piece's first window against its whole
render, and the lengths of both), then a closed-loop ladder of concurrent sessions against a real server
on 127.0.0.1 (``bench load``'s sessions): p50/p95 of first audio and of the first audible
sound, RTF, and the sessions one GPU holds with the first sound's p95 under the target.

The int8 model is refused on CUDA unless forced: its quantized ops (ConvInteger,
MatMulInteger, DynamicQuantizeLinear) have no CUDA kernels, so ONNX Runtime runs them on
the CPU and copies tensors across on every run. Forced, the placement table counts them.
Every variant's weights are resolved before anything is measured (where the Hub is out of
reach, fp32 and fp16 are derived from the offline bundle's int8 model, `voicestream.engine.
derive`), and a variant whose file is missing, or whose graph computes in another precision
(read from the file, before any engine is built), stops the bench with the reason. ``--device cpu`` runs the same steps on the CPU (the test suite's smoke test).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voicestream.bench.load import StepResult, ms_at, run_step
from voicestream.bench.report import Chart, Report, Table, machine_context, progress
from voicestream.bench.texts import LOAD_TEXT
from voicestream.bench.transport import ws_url
from voicestream.engine import KokoroEngine, ModelFiles, offline
from voicestream.engine.derive import QUANTIZED_OPS, graph_precision
from voicestream.engine.weights import resolve_weights
from voicestream.server import ServerSettings, free_port, running_server

GPU_VARIANTS = ("fp16", "fp32")
LADDER = (1, 8, 32)
TARGET_MS = 300.0
"""p95 first audible sound of a GPU server that answers like a person (the reference: 65 ms
p95 first audio at concurrency 1 on an A10G)."""
BUDGET_S = 270.0
"""Ladder steps that would start after this many seconds are skipped (and said to be)."""
WARM_UP_TEXTS = ("Hi.", "A warm up sentence of some length, so that the kernels for longer inputs are ready too.")
PROFILE_TEXT = "Where does every node of this model run?"
WINDOWED_TEXT = (
    "A first sentence long enough to be worth cutting into windows tells the listener about the weather "
    "over the hills this morning and the long road home through the valley before the evening rain."
)
"""One long first piece: its first window against its whole render (the windowed path)."""
WINDOWED_ROUNDS = 3


class BenchRefused(Exception):
    """The bench cannot measure what was asked (missing weights, int8 on CUDA, no CUDA): the reason."""


@dataclass(frozen=True)
class Placement:
    """Which provider ran each node of one model run, and the precision the graph computes in."""

    nodes: dict[str, int]
    """Provider -> nodes it ran."""
    cpu_ops: dict[str, int]
    """Op type -> nodes of it that ran on the CPU provider (on CUDA: the fallbacks)."""
    precision: str

    @classmethod
    def from_profile(cls, events: list[dict]) -> Placement:
        nodes: dict[str, tuple[str, str]] = {}
        float16 = False
        for event in events:
            args = event.get("args", {})
            if event.get("cat") != "Node" or "provider" not in args:
                continue
            nodes[event["name"]] = (args["provider"], args.get("op_name", "?"))
            shapes = [*args.get("input_type_shape", []), *args.get("output_type_shape", [])]
            float16 = float16 or any("float16" in shape for shape in shapes)
        ops = {op for _, op in nodes.values()}
        precision = "int8" if ops & QUANTIZED_OPS else "fp16" if float16 else "fp32"
        return cls(
            nodes=dict(collections.Counter(provider for provider, _ in nodes.values())),
            cpu_ops=dict(collections.Counter(op for provider, op in nodes.values() if provider == "CPUExecutionProvider")),
            precision=precision,
        )


def _cpu_ops_cell(placement: Placement) -> str:
    """Every op type the CPU provider ran (on CUDA: the fallbacks), or "all" when nothing else ran."""
    if set(placement.nodes) == {"CPUExecutionProvider"}:
        return "all"
    return ", ".join(f"{op} {n}" for op, n in sorted(placement.cpu_ops.items(), key=lambda i: -i[1])) or "none"


def profile_placement(engine: KokoroEngine) -> Placement:
    """One profiled run of ``engine``'s model on its own providers (a separate session, same options)."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as folder:
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(folder) / "placement")
        options.log_severity_level = 3
        session = ort.InferenceSession(str(engine.files.model_path), options, providers=engine.providers)
        feed = engine.model_inputs(next(engine.plan(PROFILE_TEXT)), engine.voices[0], 1.0)
        assert feed is not None, "the profile text has speakable tokens"
        session.run(None, feed)
        return Placement.from_profile(json.loads(Path(session.end_profiling()).read_text()))


def resolve_variants(model_dir: Path | None, variants: Sequence[str], device: str, allow_int8_cuda: bool) -> dict[str, ModelFiles]:
    """Every variant's weights, or the reason the bench cannot start (before anything is measured)."""
    from voicestream.engine import EngineError

    if device == "cuda" and "int8" in variants and not allow_int8_cuda:
        raise BenchRefused(
            "int8 on CUDA is refused: its quantized ops (ConvInteger, MatMulInteger, DynamicQuantizeLinear) have no "
            "CUDA kernels and run on the CPU, so it measures the copies, not the GPU. Use fp16/fp32, or pass "
            "--allow-int8-cuda to measure it anyway (the placement table then counts the nodes on each provider)."
        )
    files = {}
    for variant in variants:
        try:
            files[variant] = resolve_weights(model_dir, variant)
        except EngineError as error:
            raise BenchRefused(
                f"No {variant} weights: {error.message} (fp16 and fp32 come from the Hub, from --model-dir with "
                "onnx/model_fp16.onnx, onnx/model.onnx and voices/, or are derived from the offline bundle's int8 "
                "model: `voicestream models derive fp32`)."
            ) from None
        _refuse_another_precision(files[variant], variant)
    return files


def _refuse_another_precision(files: ModelFiles, variant: str) -> None:
    """Refuse a model file that computes in another precision than its variant (an int8 file
    in a folder given for fp32), read from its graph before any engine is built."""
    import onnx

    precision = graph_precision(onnx.load(str(files.model_path), load_external_data=False))
    if precision != variant:
        raise BenchRefused(
            f"{variant}: {files.model_path} computes in {precision}, not {variant} (from {files.source}); "
            f"point --model-dir at a folder that holds the {variant} file."
        )


def _engine(files: ModelFiles, variant: str, device: str, warm_up_texts: Sequence[str]) -> tuple[KokoroEngine, Placement]:
    engine = KokoroEngine(files, device=device)
    if engine.device != device:
        raise BenchRefused(f"{variant}: asked for {device}, but ONNX Runtime offers only {', '.join(engine.providers)}.")
    placement = profile_placement(engine)
    for text in warm_up_texts:
        offline.synthesize(engine, text)
    return engine, placement


def _engine_rtf(engine: KokoroEngine, text: str) -> float:
    started = time.perf_counter()
    audio = offline.synthesize(engine, text)
    return (time.perf_counter() - started) / (audio.size / engine.sample_rate)


@dataclass(frozen=True)
class WindowedFirstAudio:
    """A long first piece rendered whole and window by window on one engine (medians of rounds)."""

    audio_s: float
    whole_ms: float
    first_window_ms: float
    all_windows_ms: float
    windows_audio_s: float
    """The joined windows' length: the windows vocode the same front as the whole render,
    with their silences cut as they come, so it is the whole render's within a few tens of ms."""


def measure_windowed(engine: KokoroEngine, text: str = WINDOWED_TEXT, rounds: int = WINDOWED_ROUNDS) -> WindowedFirstAudio | None:
    """The windowed path on ``engine``'s device (None where the engine cannot window: its
    graph was not cut, or its first window is 0): first
    audio of the window that comes first, against the same piece rendered whole, each on
    every thread the engine has (as the server renders a new listener's first piece)."""
    if not engine.can_window:
        return None
    voice = engine.voices[0]
    piece = dataclasses.replace(next(engine.plan(text, cut_first_clause=False)), windowed=False)
    windowed = dataclasses.replace(piece, windowed=True)
    whole_ms, first_ms, all_ms = [], [], []
    warm_up = engine.device == "cuda"  # a round that builds CUDA's kernels for these shapes (the CPU builds none)
    for round_ in range(rounds + warm_up):
        started = time.perf_counter()
        whole = offline.render_whole(engine, piece, voice, 1.0, engine.max_threads).audio
        whole_done = time.perf_counter()
        parts = engine.render_parts(windowed, voice, 1.0, engine.max_threads)
        first = next(parts)
        first_done = time.perf_counter()
        joined = np.concatenate([first.audio, *(part.audio for part in parts)])
        all_done = time.perf_counter()
        if warm_up and round_ == 0:
            continue
        whole_ms.append((whole_done - started) * 1000)
        first_ms.append((first_done - whole_done) * 1000)
        all_ms.append((all_done - whole_done) * 1000)
    return WindowedFirstAudio(
        whole.size / engine.sample_rate, statistics.median(whole_ms), statistics.median(first_ms),
        statistics.median(all_ms), joined.size / engine.sample_rate,
    )


def measure_gpu(
    device: str = "cuda",
    variants: Sequence[str] = GPU_VARIANTS,
    ladder: Sequence[int] = LADDER,
    rounds: int = 2,
    target_ms: float = TARGET_MS,
    text: str = LOAD_TEXT,
    model_dir: Path | None = None,
    allow_int8_cuda: bool = False,
    budget_s: float = BUDGET_S,
    windowed_rounds: int = WINDOWED_ROUNDS,
    windowed_text: str = WINDOWED_TEXT,
    warm_up_texts: Sequence[str] = WARM_UP_TEXTS,
) -> Report:
    """Measure each variant on ``device``; raises :class:`BenchRefused` before measuring if it cannot.
    Each engine speaks ``warm_up_texts`` first, unmeasured (the test suite's CPU smoke test
    passes one short text, as it passes a short ``text`` and ``windowed_text``)."""
    started = time.monotonic()
    files = resolve_variants(model_dir, variants, device, allow_int8_cuda)
    context = machine_context()
    placement_table = Table(
        f"Where the nodes of one model run execute ({device})",
        ["variant", "graph precision", "nodes per provider", "nodes on the CPU provider, by op"],
    )
    load_table = Table(
        f"First audible sound under load on {device}: N sessions each speaking a {len(text)}-character reply "
        f"{rounds} times",
        ["variant", "sessions", "requests", "p50 first audio ms", "p95 first audio ms", "p50 first sound ms",
         "p95 first sound ms", "RTF median", "errors", "busy", f"p95 first sound ≤ {target_ms:,.0f} ms"],
    )
    windowed_table = Table(
        f"The windowed path on {device}: one {len(windowed_text)}-character first piece, whole and window by window "
        f"(medians of {windowed_rounds}{' after a warm-up' if device == 'cuda' else ''})",
        ["variant", "audio s whole", "audio s windows", "whole render ms", "first window ms", "all windows ms"],
    )
    summary = Table(
        f"Per variant on {device}",
        ["variant", "model file", "engine RTF (one stream)", f"sessions at p95 first sound ≤ {target_ms:,.0f} ms"],
    )
    notes: list[str] = []
    series: dict[str, list[float | None]] = {}
    with progress("bench gpu", len(files) * sum(ladder) * rounds) as advance:
        for variant, variant_files in files.items():
            engine, placement = _engine(variant_files, variant, device, warm_up_texts)
            if placement.cpu_ops and device == "cuda":
                notes.append(f"{variant}: {sum(placement.cpu_ops.values())} nodes ran on the CPU provider")
            placement_table.add(
                variant, placement.precision, ", ".join(f"{p}: {n}" for p, n in placement.nodes.items()),
                _cpu_ops_cell(placement),
            )
            rtf = _engine_rtf(engine, text)
            if (windowed := measure_windowed(engine, windowed_text, windowed_rounds)) is not None:
                windowed_table.add(
                    variant, windowed.audio_s, windowed.windows_audio_s, windowed.whole_ms, windowed.first_window_ms,
                    windowed.all_windows_ms,
                )
            else:
                notes.append(f"{variant}: the graph could not be cut, so no windowed path")
            steps: list[StepResult] = []
            settings = ServerSettings(host="127.0.0.1", port=free_port(), max_sessions=max(ladder) * 2)
            with running_server(engine, settings) as base:
                for sessions in ladder:
                    if time.monotonic() - started > budget_s:
                        notes.append(f"{variant}, {sessions} sessions: skipped (past the {budget_s:g} s budget)")
                        advance(sessions * rounds)
                        continue
                    steps.append(asyncio.run(run_step(ws_url(base), sessions, text, rounds, advance)))
            passing = []
            for step in steps:
                p95 = ms_at(step.first_sound_s, 0.95)
                ok = p95 is not None and p95 <= target_ms and not step.errors and not step.busy
                passing += [step.sessions] if ok else []
                load_table.add(
                    variant, step.sessions, len(step.first_audio_s), ms_at(step.first_audio_s, 0.5),
                    ms_at(step.first_audio_s, 0.95), ms_at(step.first_sound_s, 0.5), p95,
                    statistics.median(step.rtf) if step.rtf else None, step.errors, step.busy, ok,
                )
            summary.add(variant, variant_files.model_path.name, rtf, max(passing, default=0))
            series[f"{variant} p95 first sound"] = [ms_at(step.first_sound_s, 0.95) for step in steps]
    load_table.note = "; ".join(notes)
    chart = Chart(
        "p95 first audible sound under load", list(ladder),
        {name: values + [None] * (len(ladder) - len(values)) for name, values in series.items()}
        | {"target": [target_ms] * len(ladder)},
        "ms", "concurrent sessions", kind="line",
    )
    return Report(
        "gpu", [placement_table, windowed_table, load_table, summary], [chart],
        context={**context, "device": device, "rounds": rounds, "target_p95_ms": target_ms,
                 "wall_s": round(time.monotonic() - started, 1)},
    )
