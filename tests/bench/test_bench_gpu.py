"""`bench gpu` on the CPU (`--device cpu`, int8, tiny ladder) as its own smoke test, and its refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from voicestream.bench.gpu import BenchRefused, Placement, measure_gpu
from voicestream.bench.report import publish
from voicestream.cli import app
from voicestream.engine import KokoroEngine


def test_gpu_bench_runs_on_the_cpu_with_int8(engine: KokoroEngine, tmp_path: Path, capsys) -> None:
    report = measure_gpu(
        device="cpu", variants=("int8",), ladder=(1, 2), rounds=1, text="Hello there. Bye now.", windowed_rounds=1,
        windowed_text="A first piece long enough for a few windows of the vocoder to follow its first one.",
        warm_up_texts=("Hi.",),  # no timing here is checked closely: one short warm-up
    )

    placement, windowed, load, summary = report.tables
    assert placement.rows[0][:2] == ["int8", "int8"]  # the profiled graph's quantized ops say int8
    assert placement.rows[0][2].startswith("CPUExecutionProvider: ") and placement.rows[0][3] == "all"
    assert load.column("sessions") == [1, 2] and load.column("requests") == [1, 2]
    assert load.column("errors") == [0, 0] and load.column("busy") == [0, 0]
    for audio_ms, sound_ms in zip(load.column("p50 first audio ms"), load.column("p50 first sound ms"), strict=True):
        assert sound_ms >= audio_ms > 0  # the first sound plays at or after the first byte
    ((variant, whole_s, windows_s, whole_ms, first_ms, all_ms),) = windowed.rows
    assert variant == "int8" and whole_s > 3 and abs(windows_s - whole_s) < 0.25  # the same speech, cut alike
    assert 0 < first_ms < all_ms and whole_ms > 0
    assert summary.rows[0][1] == engine.files.model_path.name and 0 < summary.rows[0][2] < 20

    publish(report, tmp_path / "gpu.json", None)
    assert "First audible sound under load on cpu" in capsys.readouterr().out
    assert json.loads((tmp_path / "gpu.json").read_text())["context"]["device"] == "cpu"


def test_int8_on_cuda_is_refused_unless_forced() -> None:
    with pytest.raises(BenchRefused, match="--allow-int8-cuda"):
        measure_gpu(device="cuda", variants=("int8",))
    result = CliRunner().invoke(app, ["bench", "gpu", "--variant", "int8"])
    assert result.exit_code == 2 and "int8 on CUDA is refused" in result.output


def test_a_missing_variant_stops_the_bench_before_it_measures(tmp_path: Path) -> None:
    """A --model-dir without the variant's files is refused before anything is measured
    (without one, fp16 and fp32 are derived from the bundle's int8: tests/engine/test_derive.py)."""
    empty = tmp_path / "no-weights"
    empty.mkdir()
    with pytest.raises(BenchRefused, match="No fp16 weights"):
        measure_gpu(device="cpu", variants=("fp16",), model_dir=empty)


def test_a_folder_with_another_precision_is_refused(engine: KokoroEngine) -> None:
    with pytest.raises(BenchRefused, match="computes in int8, not fp32"):
        measure_gpu(device="cpu", variants=("fp32",), model_dir=engine.files.model_path.parent)


def test_placement_counts_the_nodes_that_fell_back_to_the_cpu() -> None:
    def node(name: str, provider: str, op: str, dtype: str = "float") -> dict:
        args = {"provider": provider, "op_name": op, "input_type_shape": [{dtype: [1, 4]}]}
        return {"cat": "Node", "name": f"{name}_kernel_time", "args": args}

    cuda, cpu = "CUDAExecutionProvider", "CPUExecutionProvider"
    int8 = [node("a", cuda, "Mul"), node("b", cpu, "ConvInteger"), node("b", cpu, "ConvInteger"),
            node("c", cpu, "MatMulInteger"), {"cat": "Session", "name": "model_run", "args": {}}]
    placement = Placement.from_profile(int8)
    assert placement.nodes == {cuda: 1, cpu: 2}  # a node run twice is one node
    assert placement.cpu_ops == {"ConvInteger": 1, "MatMulInteger": 1} and placement.precision == "int8"
    assert Placement.from_profile([node("a", cuda, "Mul", "float16")]).precision == "fp16"
    assert Placement.from_profile([node("a", cuda, "Mul")]).precision == "fp32"
