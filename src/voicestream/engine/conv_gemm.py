"""The int8 model's convolutions as matrix products that run on the CPU's VNNI instructions.

The offline Kokoro-82M int8 model quantizes its convolutions dynamically: each one is
``DynamicQuantizeLinear`` (the input to uint8) -> ``ConvInteger`` with **uint8 weights** ->
an int32 bias, a cast and a scale. ONNX Runtime's CPU ``ConvInteger`` runs that as an
im2col and MLAS's uint8 x uint8 GEMM (``vpmaddwd``: the hottest loop of a whole test run
under ``perf``), and has no fast path for int8 weights (shifted to int8 the same convolution
ran 3.6x slower; docs/BENCHMARKS.md). Its ``MatMulInteger`` does: uint8 x int8 on the
VNNI instruction ``vpdpbusd``. So each stride-1 ``ConvInteger`` of the model becomes

    Transpose (to time-major) -> Pad (with the input's zero point, which is what a real
    zero quantizes to) -> Gather (rows t + j*dilation for every tap j: the im2col, in one
    copy) -> MatMulInteger (uint8 x int8 weights) -> Transpose (back to channel-major)

with the weights and their zero point shifted by -128 to int8. Every product is the same
integer, ``(x - x_zero) * (w - w_zero)``, summed in int32, so the output is the
convolution's, bit for bit, and the audio is the model's (tests/engine/test_graph_cache.py).
84 of the model's 87 convolutions are rewritten (the three strided ones are left), and a
render costs about a third less CPU (docs/BENCHMARKS.md, "Convolutions as VNNI matrix
products").

Only where the product is exact: with VNNI (``avx512_vnni`` or ``avx_vnni``) an x86 CPU
sums uint8 x int8 products straight into int32. Without it MLAS's uint8 x int8 kernel adds
pairs of products in int16 (``vpmaddubsw``), which saturates, so other CPUs (and other
architectures, not measured) keep the model's own ``ConvInteger``.
"""

from __future__ import annotations

import functools
import logging
import math
import platform
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni"})
"""The x86 CPU flags under which MLAS sums uint8 x int8 products exactly (``vpdpbusd``)."""
CPU_INFO = Path("/proc/cpuinfo")
MIN_OPSET = 11
"""From opset 11 ``Pad`` takes its pads as an input and ``Range`` exists (the rewrite's im2col)."""


@functools.cache
def exact_on_this_cpu() -> bool:
    """Whether ONNX Runtime's uint8 x int8 products are exact here (an x86 CPU with VNNI)."""
    return exact_on(platform.machine(), CPU_INFO)


def exact_on(machine: str, cpu_info: Path) -> bool:
    """Whether uint8 x int8 products are exact on a CPU of this architecture (``platform.machine()``)
    whose Linux ``/proc/cpuinfo`` is ``cpu_info``; False where that file cannot be read."""
    if machine.lower() not in {"x86_64", "amd64"}:
        return False
    try:
        with cpu_info.open() as info:
            for line in info:
                if line.startswith("flags"):
                    return not VNNI_FLAGS.isdisjoint(line.split(":", 1)[1].split())
    except OSError:
        return False
    return False


def convs_as_gemms(model: Any) -> int:
    """Rewrite the stride-1 ``ConvInteger`` nodes of ``model`` (an ``onnx.ModelProto``, in
    place) whose uint8 weights and zero point are constants; the number rewritten."""
    from onnx import numpy_helper

    opset = next((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), 0)
    if opset < MIN_OPSET:
        return 0
    graph = model.graph
    constants = {initializer.name: initializer for initializer in graph.initializer}
    nodes: list[Any] = []
    added: list[Any] = []
    replaced: set[str] = set()
    rewritten = 0
    for node in graph.node:
        conv = _conv(node, constants)
        if conv is None:
            nodes.append(node)
            continue
        weights, weight_zero, attributes = conv
        new_nodes, new_constants = _as_gemm(node, numpy_helper.to_array(weights), numpy_helper.to_array(weight_zero), attributes)
        nodes += new_nodes
        added += new_constants
        replaced.add(node.input[1])
        rewritten += 1
    if not rewritten:
        return 0
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(added)
    # the uint8 weights the rewrite replaced go, unless something else still reads them
    unused = replaced - _referenced(graph)
    kept = [initializer for initializer in graph.initializer if initializer.name not in unused]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    log.debug("%d ConvInteger nodes rewritten as MatMulInteger", rewritten)
    return rewritten


def _referenced(graph: Any) -> set[str]:
    """Every name the graph's nodes read, in its subgraphs too, and its outputs."""
    from onnx import AttributeProto

    names = {output.name for output in graph.output}
    for node in graph.node:
        names.update(node.input)
        for attribute in node.attribute:
            if attribute.type == AttributeProto.GRAPH:
                names |= _referenced(attribute.g)
            elif attribute.type == AttributeProto.GRAPHS:
                for subgraph in attribute.graphs:
                    names |= _referenced(subgraph)
    return names


def _conv(node: Any, constants: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]] | None:
    """The weights, their zero point and the attributes of a ConvInteger this rewrite
    covers (1-D, stride 1, one group, explicit pads, constant uint8 weights, one zero
    point), or None."""
    from onnx import TensorProto, helper

    if node.op_type != "ConvInteger" or node.domain not in ("", "ai.onnx") or len(node.input) != 4:
        return None
    weights, weight_zero = constants.get(node.input[1]), constants.get(node.input[3])
    if weights is None or weight_zero is None or weights.data_type != TensorProto.UINT8 or len(weights.dims) != 3:
        return None
    attributes = {attribute.name: helper.get_attribute_value(attribute) for attribute in node.attribute}
    if (
        list(attributes.get("strides", [1])) != [1]
        or attributes.get("group", 1) != 1
        or attributes.get("auto_pad", b"NOTSET") != b"NOTSET"  # onnx gives string attributes as bytes
        or weight_zero.data_type != TensorProto.UINT8
        or math.prod(weight_zero.dims) != 1
    ):
        return None
    return weights, weight_zero, attributes


def _as_gemm(node: Any, weights: Any, weight_zero: Any, attributes: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """The nodes and constants that compute ``node``'s int32 output as one MatMulInteger."""
    import numpy as np
    from onnx import helper, numpy_helper

    out_channels, in_channels, taps = weights.shape
    (dilation,) = (int(value) for value in attributes.get("dilations", [1]))
    pad_before, pad_after = (int(pad) for pad in attributes.get("pads", [0, 0]))
    prefix = f"{node.output[0]}/gemm"  # tensor names are unique; a node may have no name
    x, x_zero = node.input[0], node.input[2]

    constants: list[Any] = []

    def name(part: str) -> str:
        return f"{prefix}/{part}"

    def constant(part: str, value: Any) -> str:
        constants.append(numpy_helper.from_array(np.asarray(value), name(part)))
        return name(part)

    # row j * in_channels + c of the int8 weights multiplies input channel c at tap j
    shifted = (weights.astype(np.int16) - 128).astype(np.int8)
    gemm_weights = constant("weights", np.ascontiguousarray(shifted.transpose(2, 1, 0).reshape(taps * in_channels, out_channels)))
    gemm_zero = constant("weights_zero", np.int8(int(weight_zero.reshape(())) - 128))
    nodes = [helper.make_node("Transpose", [x], [name("time_major")], perm=[0, 2, 1])]
    rows = name("time_major")
    if pad_before or pad_after:
        pads = constant("pads", np.array([0, pad_before, 0, 0, pad_after, 0], dtype=np.int64))
        nodes.append(helper.make_node("Pad", [rows, pads, x_zero], [name("padded")], mode="constant"))
        rows = name("padded")
    if taps > 1:
        # output frame t reads input rows t + j * dilation, j < taps: t < padded length - span
        nodes += [
            helper.make_node("Shape", [rows], [name("shape")]),
            helper.make_node("Gather", [name("shape"), constant("time_axis", np.int64(1))], [name("length")], axis=0),
            helper.make_node("Sub", [name("length"), constant("span", np.int64(dilation * (taps - 1)))], [name("frames")]),
            helper.make_node("Range", [constant("zero", np.int64(0)), name("frames"), constant("step", np.int64(1))], [name("t")]),
            helper.make_node("Reshape", [name("t"), constant("column", np.array([-1, 1], dtype=np.int64))], [name("t_column")]),
            helper.make_node("Add", [name("t_column"), constant("taps", (np.arange(taps, dtype=np.int64) * dilation).reshape(1, taps))], [name("indices")]),
            helper.make_node("Gather", [rows, name("indices")], [name("windows")], axis=1),
            helper.make_node("Reshape", [name("windows"), constant("im2col_shape", np.array([0, 0, taps * in_channels], dtype=np.int64))], [name("im2col")]),
        ]
        rows = name("im2col")
    nodes += [
        helper.make_node("MatMulInteger", [rows, gemm_weights, x_zero, gemm_zero], [name("product")]),
        helper.make_node("Transpose", [name("product")], [node.output[0]], perm=[0, 2, 1]),
    ]
    return nodes, constants
