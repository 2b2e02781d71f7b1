"""The int8 model's convolutions as VNNI matrix products (`voicestream.engine.conv_gemm`): the
same integers as ``ConvInteger``, on the CPUs where ONNX Runtime's uint8 x int8 products are
exact. The whole model, rewritten, gives the original's audio bit for bit
(tests/engine/test_graph_cache.py)."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from voicestream.engine import conv_gemm
from voicestream.engine.kokoro import session_options

CHANNELS, FRAMES = 16, 50
CONVS = (  # (name, output channels, taps, dilation, pads, stride)
    ("dilated", 24, 7, 3, (9, 9), 1),
    ("uneven_pads", 8, 4, 1, (2, 1), 1),
    ("pointwise", 12, 1, 1, (0, 0), 1),
    ("strided", 8, 3, 1, (1, 1), 2),
)


def _model() -> onnx.ModelProto:
    """One input quantized as the int8 model does (DynamicQuantizeLinear) into four
    ConvInteger nodes with uint8 weights and zero points far from 0 and 128."""
    rng = np.random.default_rng(7)
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "x_scale", "x_zero"])]
    constants, outputs = [], []
    for name, out_channels, taps, dilation, pads, stride in CONVS:
        weights = rng.integers(0, 256, (out_channels, CHANNELS, taps), dtype=np.uint8)
        constants += [numpy_helper.from_array(weights, f"{name}_w"), numpy_helper.from_array(np.array(np.uint8(77 + taps)), f"{name}_wz")]
        nodes.append(
            helper.make_node(
                "ConvInteger", ["xq", f"{name}_w", "x_zero", f"{name}_wz"], [name], name=name,
                kernel_shape=[taps], dilations=[dilation], pads=list(pads), strides=[stride], group=1,
            )
        )
        outputs.append(helper.make_tensor_value_info(name, TensorProto.INT32, None))
    graph = helper.make_graph(
        nodes, "convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, CHANNELS, None])], outputs, constants
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), session_options(1), providers=["CPUExecutionProvider"])
    return [np.asarray(output) for output in session.run(None, {"x": x})]


def _ops(model: onnx.ModelProto) -> collections.Counter[str]:
    return collections.Counter(node.op_type for node in model.graph.node)


def test_the_stride_one_convolutions_become_matrix_products_and_the_strided_one_stays() -> None:
    original, rewritten = _model(), _model()
    assert conv_gemm.convs_as_gemms(rewritten) == 3
    assert _ops(rewritten)["ConvInteger"] == 1 and _ops(rewritten)["MatMulInteger"] == 3
    (kept,) = (node for node in rewritten.graph.node if node.op_type == "ConvInteger")
    assert kept.name == "strided"
    weights = {tensor.name: tensor for tensor in rewritten.graph.initializer}
    assert "dilated_w" not in weights and weights["strided_w"].data_type == TensorProto.UINT8
    gemm = weights["dilated/gemm/weights"]
    assert gemm.data_type == TensorProto.INT8 and list(gemm.dims) == [7 * CHANNELS, 24]
    # the output shapes hold for any length: the im2col's frame count comes from the input's
    for frames in (FRAMES, 1):
        x = np.random.default_rng(frames).standard_normal((1, CHANNELS, frames)).astype(np.float32)
        assert [out.shape for out in _run(rewritten, x)] == [out.shape for out in _run(original, x)]


@pytest.mark.skipif(not conv_gemm.exact_on_this_cpu(), reason="uint8 x int8 products are exact only with VNNI")
def test_the_matrix_products_give_the_convolutions_integers_exactly() -> None:
    original, rewritten = _model(), _model()
    conv_gemm.convs_as_gemms(rewritten)
    # an offset input: its zero point is neither 0 nor 128, so the pads must be that zero point
    x = (np.random.default_rng(3).standard_normal((1, CHANNELS, FRAMES)) + 1.5).astype(np.float32)
    zero = int(_run(onnx.load_from_string(_quantizer()), x)[0])
    assert zero not in (0, 128)
    for expected, got in zip(_run(original, x), _run(rewritten, x), strict=True):
        np.testing.assert_array_equal(got, expected)


def _quantizer() -> bytes:
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "scale", "zero"])
    graph = helper.make_graph(
        [node], "quantize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, CHANNELS, None])],
        [helper.make_tensor_value_info("zero", TensorProto.UINT8, [])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_replaced_weights_that_something_else_reads_are_kept() -> None:
    model = _model()
    model.graph.output.append(helper.make_tensor_value_info("dilated_w", TensorProto.UINT8, None))  # read by no node
    assert conv_gemm.convs_as_gemms(model) == 3
    names = {tensor.name for tensor in model.graph.initializer}
    assert "dilated_w" in names and "uneven_pads_w" not in names and "pointwise_w" not in names
    x = np.random.default_rng(5).standard_normal((1, CHANNELS, FRAMES)).astype(np.float32)
    assert _run(model, x)[-1].shape == (24, CHANNELS, 7)


def test_a_model_of_an_older_opset_is_left_as_it_is() -> None:
    model = _model()
    model.opset_import[0].version = conv_gemm.MIN_OPSET - 1
    assert conv_gemm.convs_as_gemms(model) == 0 and _ops(model)["ConvInteger"] == len(CONVS)


@pytest.mark.parametrize(
    ("flags", "exact"),
    [("fpu sse avx2 avx512f avx512bw", False), ("fpu avx2 avx512f avx512_vnni", True), ("fpu avx2 avx_vnni", True)],
)
def test_vnni_is_read_from_the_cpu_flags(tmp_path: Path, flags: str, exact: bool) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
    assert conv_gemm.exact_on("x86_64", info) is exact
    assert conv_gemm.exact_on("aarch64", info) is False  # not measured on other architectures
    assert conv_gemm.exact_on("x86_64", tmp_path / "missing") is False
