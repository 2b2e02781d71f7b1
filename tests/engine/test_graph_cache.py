"""The edited model graph kept in the cache (`voicestream.engine.graph`): written once, read
back as the same model, dropped when its model file changes or the entry is damaged."""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from voicestream.engine import KokoroEngine, conv_gemm, graph
from voicestream.engine.kokoro import session_options


def _entries(cache: Path) -> list[Path]:
    return sorted(path.parent for path in (cache / "graphs").glob(f"*/{graph.MANIFEST}"))


def _ops(model: str | bytes) -> collections.Counter[str]:
    proto = onnx.load(model) if isinstance(model, str) else onnx.load_from_string(model)
    return collections.Counter(node.op_type for node in proto.graph.node)


def _audio(model: str | bytes, feed: dict[str, np.ndarray]) -> np.ndarray:
    session = ort.InferenceSession(model, session_options(1), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, feed)[0])


def test_the_cached_graph_is_the_edited_model_and_follows_its_file(
    engine: KokoroEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("VOICESTREAM_CACHE", str(tmp_path))
    model = engine.files.model_path
    stored = graph.load_graph(model)
    (entry,) = _entries(tmp_path)
    assert stored.split is not None and stored.durations == graph.ENCODER_DURATIONS
    assert {stored.model, stored.split.front, stored.split.vocoder} == {
        str(entry / f"{name}.onnx") for name in ("model", "front", "vocoder")
    }
    made = os.stat(stored.model).st_mtime_ns
    assert graph.load_graph(model) == stored and os.stat(stored.model).st_mtime_ns == made  # read, not made again

    # the same audio, bit for bit, as the graph edited in memory (what a CUDA engine loads)
    edited = graph.load_graph(model, ["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert isinstance(edited.model, bytes) and edited.durations == stored.durations
    feed = engine.model_inputs(next(engine.plan("Hello there.")), "af_heart", 1.0)
    assert feed is not None
    np.testing.assert_array_equal(_audio(stored.model, feed), _audio(edited.model, feed))
    # ... though, where the CPU's uint8 x int8 products are exact, it runs its convolutions
    # as matrix products (`conv_gemm`) and the in-memory edit for CUDA does not
    convs = {name: _ops(model)["ConvInteger"] for name, model in (("stored", stored.model), ("edited", edited.model))}
    assert convs["edited"] == 87
    assert convs["stored"] == (3 if conv_gemm.exact_on_this_cpu() else 87)

    # an entry made from the file as it was before (another mtime) is dropped, this one kept
    outdated = tmp_path / "graphs" / "outdated"
    outdated.mkdir()
    stat = model.stat()
    source = {"path": str(model.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns - 1}
    (outdated / graph.MANIFEST).write_text(json.dumps({"source": source, "durations": None, "files": {}}))
    graph._remove_outdated(tmp_path / "graphs")
    assert _entries(tmp_path) == [entry]

    # a damaged entry is dropped when read (the load then makes it again, as on a miss)
    with open(stored.split.vocoder, "r+b") as damaged:
        damaged.truncate(1000)
    assert graph._cached(model) is None and not entry.exists()
    assert "damaged" in caplog.text
