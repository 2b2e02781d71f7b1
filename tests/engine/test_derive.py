"""fp32 and fp16 derived from the offline bundle's int8 model (`voicestream models derive`):
no quantized op left, the graph the engine cuts, audio that matches int8's, the ops that
lose accuracy kept in float32, and the cache reused. Derived once, in a cache of its own."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from voicestream.engine import KokoroEngine, ModelFiles, resolve_weights
from voicestream.engine.derive import (
    FLOAT32_OPS,
    float32_nodes,
    graph_precision,
    quantized_ops,
)
from voicestream.engine.graph import ENCODER_DURATIONS, load_graph
from voicestream.engine.offline import synthesize
from voicestream.engine.similarity import similarity
from voicestream.engine.weights import MARKER_FILE, MODEL_FILE, VOICE_DIR, variant_for

SENTENCE = "It costs five dollars, said Doctor Lee, and the train leaves at noon."


@pytest.fixture(scope="module")
def derived(engine: KokoroEngine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ModelFiles]]:
    """fp32 and fp16 resolved offline from a cache that holds only the int8 weights, and the
    int8 model's edited graph: the session's own entry (`similarity` loads int8 too), not
    edited and stored a second time."""
    cache = tmp_path_factory.mktemp("cache")
    int8 = cache / "kokoro-82m-int8"
    int8.mkdir()
    (int8 / MODEL_FILE).symlink_to(engine.files.model_path)
    (int8 / VOICE_DIR).symlink_to(engine.files.voices_dir)
    shutil.copy(engine.files.model_path.parent / MARKER_FILE, int8 / MARKER_FILE)
    shared = load_graph(engine.files.model_path)
    if isinstance(shared.model, str):  # the session's graph cache could be written
        entry = Path(shared.model).parent
        (cache / "graphs").mkdir()
        (cache / "graphs" / entry.name).symlink_to(entry)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VOICESTREAM_CACHE", str(cache))
        patch.setenv("VOICESTREAM_OFFLINE", "1")
        patch.delenv("VOICESTREAM_MODEL_DIR", raising=False)
        yield {variant: resolve_weights(variant=variant) for variant in ("fp32", "fp16")}


def test_fp32_has_no_quantized_op_and_keeps_the_engines_cut(derived: dict[str, ModelFiles]) -> None:
    files = derived["fp32"]
    assert files.source.startswith("derived from int8")
    model = onnx.load(str(files.model_path))
    assert quantized_ops(model) == {}
    assert graph_precision(model) == "fp32"  # what `bench gpu` reads before it builds an engine
    assert {"MatMul", "Conv", "LSTM"} <= {node.op_type for node in model.graph.node}
    assert all(tensor.data_type != TensorProto.INT8 for tensor in model.graph.initializer)
    graph = load_graph(files.model_path)
    assert graph.durations == ENCODER_DURATIONS
    assert graph.split is not None


def test_fp32_sounds_like_int8(engine: KokoroEngine, derived: dict[str, ModelFiles]) -> None:
    """Measured on three sentences: 98.6% of token durations the same, total length within
    0.9%, the two vocoders' waveforms from the same features correlated 0.988."""
    files = derived["fp32"]
    alike = similarity(files.model_path, engine.files.model_path, files.voices_dir, [SENTENCE])
    assert alike.tokens_same >= 0.9
    assert abs(alike.length_ratio - 1) <= 0.03
    assert alike.vocoder_correlation > 0.97
    fp32 = KokoroEngine(files, max_threads=1, first_window_s=0)
    audio, reference = synthesize(fp32, SENTENCE), synthesize(engine, SENTENCE)
    assert np.isfinite(audio).all() and np.abs(audio).max() > 0.05
    assert abs(audio.size / reference.size - 1) <= 0.03


def test_fp16_stores_float16_and_keeps_the_sensitive_ops_float32(derived: dict[str, ModelFiles]) -> None:
    files = derived["fp16"]
    model = onnx.load(str(files.model_path))
    onnx.checker.check_model(model)
    half = sum(t.data_type == TensorProto.FLOAT16 for t in model.graph.initializer)
    assert half > 400
    assert graph_precision(model) == "fp16"
    assert files.model_path.stat().st_size < 0.6 * derived["fp32"].model_path.stat().st_size
    sensitive = [node.name for node in model.graph.node if node.op_type in FLOAT32_OPS]
    assert {"LSTM", "Sin", "Atan", "ReduceMean", "Pow", "Sqrt"} <= {
        node.op_type for node in model.graph.node if node.op_type in FLOAT32_OPS
    }
    assert float32_nodes(model, sensitive) == sensitive
    assert [i.type.tensor_type.elem_type for i in (*model.graph.input, *model.graph.output)].count(TensorProto.FLOAT16) == 0
    alike = similarity(files.model_path, derived["fp32"].model_path, files.voices_dir, [SENTENCE])
    assert alike.tokens_same >= 0.95 and alike.vocoder_correlation > 0.99


def test_a_derived_model_is_cached_and_int8_stays_int8_off_cuda(derived: dict[str, ModelFiles]) -> None:
    files = derived["fp32"]
    written = files.model_path.stat().st_mtime_ns
    again = resolve_weights(variant="fp32")
    assert again.model_path == files.model_path and again.source.startswith("cache")
    assert files.model_path.stat().st_mtime_ns == written
    assert len(again.voice_names()) == len(files.voice_names()) > 0
    assert variant_for("cpu", "int8") == "int8"
    assert variant_for("cuda", "fp16") == "fp16"
