"""Float models derived from the offline bundle's int8 graph, for a GPU that reaches no Hub.

The int8 model is ONNX Runtime's dynamic quantization of the float export: each weight
stored as 8-bit integers with a scale (and zero point), each activation quantized at run
time (DynamicQuantizeLinear), the products taken in integers (MatMulInteger, ConvInteger,
com.microsoft DynamicQuantizeLSTM) and scaled back to float. CUDA has no kernels for those
ops, so ONNX Runtime runs them on the CPU and copies tensors across on every run.

`dequantize` undoes it: each integer product and the Cast/Add/Mul chain that scales it
back becomes one float MatMul, Conv or LSTM on the dequantized weights
``(q - zero_point) * scale``, which keeps the output name the rest of the graph reads (so
`voicestream.engine.graph` still finds its durations and its vocoder cut). The weights keep
their 8-bit rounding, but nothing is rounded at run time any more: the audio is the int8
model's within the activations' quantization noise. `to_float16` then stores and computes
in float16 what ONNX Runtime's CUDA kernels take in float16, and keeps in float32 the ops
whose range or precision the audio depends on (`FLOAT32_OPS`).
"""

from __future__ import annotations

import os
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from voicestream.engine.graph import VOCODER_FEATURES, VOCODER_SOURCE, VOCODER_STYLE

if TYPE_CHECKING:
    import onnx

QUANTIZED_OPS = frozenset({
    "ConvInteger", "MatMulInteger", "DynamicQuantizeLinear", "DynamicQuantizeLSTM", "DequantizeLinear",
    "QuantizeLinear", "MatMulIntegerToFloat", "DynamicQuantizeMatMul", "QLinearConv", "QLinearMatMul",
})
FLOAT32_OPS = (
    # Normalization: sums of squares over hundreds of channels overflow or lose digits in fp16.
    "LayerNormalization", "SkipLayerNormalization", "InstanceNormalization", "ReduceMean", "ReduceSum", "Pow", "Sqrt",
    # Recurrences (the duration predictor's and the text encoder's LSTMs) carry their error along the sequence.
    "LSTM",
    # The vocoder's harmonic source: phase accumulated over a whole piece, then sin/cos and the STFT.
    "CumSum", "Sin", "Cos", "Atan", "Exp", "STFT", "Range", "Floor", "Round", "Clip", "Softmax",
)
"""Op types `to_float16` keeps in float32."""
FLOAT32_NODES = re.compile(
    r"/encoder/predictor/|/decoder/decoder/generator/(m_source|f0_upsamp|istft)/|/decoder/decoder/generator/[^/]+$"
)
"""Nodes kept in float32 whatever their op (names matched from the start): the duration
predictor (durations are rounded to whole frames, so a small error there shifts every later
word), and the vocoder's harmonic source, its STFT phase (``atan(imaginary / real)``: a
real part that float16 rounds to zero makes a NaN) and its inverse STFT."""
MOVEMENT_OPS = frozenset({"Reshape", "Gather", "Transpose", "Squeeze", "Unsqueeze", "Slice", "Concat", "Split", "Expand", "Pad"})
"""Ops that move values without computing: they stay in the precision of their data input."""

Progress = Callable[[str, int, int], None]


def graph_precision(model: onnx.ModelProto) -> str:
    """What a graph computes in, read from the graph alone (no session): "int8" where it holds
    a quantized op, "fp16" where a weight is float16, else "fp32"."""
    from onnx import TensorProto

    if quantized_ops(model):
        return "int8"
    return "fp16" if any(tensor.data_type == TensorProto.FLOAT16 for tensor in model.graph.initializer) else "fp32"


def quantized_ops(model: onnx.ModelProto) -> dict[str, int]:
    """How many nodes of each quantized op type the graph holds."""
    counts: dict[str, int] = defaultdict(int)
    for node in model.graph.node:
        if node.op_type in QUANTIZED_OPS:
            counts[node.op_type] += 1
    return dict(counts)


class _Graph:
    """Producer and consumer lookups over one graph, and the float weights added to it."""

    def __init__(self, model: onnx.ModelProto) -> None:
        from onnx import numpy_helper

        self.model = model
        self.graph = model.graph
        self.initializers = {tensor.name: tensor for tensor in self.graph.initializer}
        self.producer = {output: node for node in self.graph.node for output in node.output}
        self.consumers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
        for node in self.graph.node:
            for name in node.input:
                self.consumers[name].append(node)
        self._to_array = numpy_helper.to_array
        self._from_array = numpy_helper.from_array

    def array(self, name: str) -> np.ndarray:
        if name not in self.initializers:
            raise ValueError(f"{name} is not a constant weight: this graph is not one `dequantize` knows")
        return self._to_array(self.initializers[name])

    def only_consumer(self, name: str, op_type: str) -> onnx.NodeProto:
        consumers = self.consumers[name]
        if len(consumers) != 1 or consumers[0].op_type != op_type:
            raise ValueError(f"{name} feeds {[node.op_type for node in consumers]}, not one {op_type}")
        return consumers[0]

    def add_weight(self, name: str, values: Callable[[], np.ndarray]) -> str:
        """The float initializer made from the quantized weight ``name`` (once, however many
        nodes read it)."""
        if f"{name}_float" in self.initializers:
            return f"{name}_float"
        tensor = self._from_array(np.ascontiguousarray(values(), dtype=np.float32), f"{name}_float")
        self.graph.initializer.append(tensor)
        self.initializers[tensor.name] = tensor
        return tensor.name

    def dequantized(self, weight: str, scale: str, zero_point: str, axes: tuple[int, ...]) -> np.ndarray:
        """``(q - zero_point) * scale``: per tensor (a scalar scale), or per channel with the
        scale's dimensions along the weight's ``axes``."""
        values = self.array(weight).astype(np.float32)
        scales = self.array(scale).astype(np.float32)
        offsets = self.array(zero_point).astype(np.float32) if zero_point else np.zeros_like(scales)
        shape = [1] * values.ndim
        for axis, size in zip(axes, scales.shape, strict=False):
            shape[axis] = size
        return (values - offsets.reshape(shape)) * scales.reshape(shape)


def _float_product(graph: _Graph, node: onnx.NodeProto) -> tuple[list[onnx.NodeProto], onnx.NodeProto]:
    """The float MatMul or Conv for one MatMulInteger or ConvInteger, and the nodes it replaces.

    The quantizer's chain is ``op -> [Add int32 bias] -> Cast -> Mul(scale)``; the bias was
    quantized from a float initializer with the activation's scale (``Div(bias, scale)``,
    rounded, cast, reshaped), and that float bias goes back on the Conv."""
    from onnx import helper

    dynamic = graph.producer.get(node.input[0])
    if dynamic is None or dynamic.op_type != "DynamicQuantizeLinear":
        raise ValueError(f"{node.name}: its input is not quantized at run time")
    chain = [node]
    bias = None
    after = graph.consumers[node.output[0]]
    if len(after) == 1 and after[0].op_type == "Add":
        add = after[0]
        chain.append(add)
        source = graph.producer[add.input[1]]
        while source.op_type != "Div":
            source = graph.producer[source.input[0]]
        bias = source.input[0]
        graph.array(bias)
    cast = graph.only_consumer(chain[-1].output[0], "Cast")
    scale = graph.only_consumer(cast.output[0], "Mul")
    chain += [cast, scale]
    weight, zero_point = node.input[1], node.input[3] if len(node.input) > 3 else ""
    weight_scale = next(name for name in graph.producer[scale.input[1]].input if name in graph.initializers)
    if node.op_type == "MatMulInteger":
        float_weight = graph.add_weight(weight, lambda: graph.dequantized(weight, weight_scale, zero_point, (1,)))
        inputs = [dynamic.input[0], float_weight]
        return chain, helper.make_node("MatMul", inputs, [scale.output[0]], f"{node.name}_float")
    float_weight = graph.add_weight(weight, lambda: graph.dequantized(weight, weight_scale, zero_point, (0,)))
    inputs = [dynamic.input[0], float_weight, *([bias] if bias else [])]
    conv = helper.make_node("Conv", inputs, [scale.output[0]], f"{node.name}_float")
    conv.attribute.extend(node.attribute)
    return chain, conv


def _float_lstm(graph: _Graph, node: onnx.NodeProto) -> onnx.NodeProto:
    """An ONNX LSTM for one DynamicQuantizeLSTM.

    The contrib op stores W and R as ``[directions, input, 4 * hidden]`` (the transpose of
    LSTM's ``[directions, 4 * hidden, input]``), quantized per direction (scale
    ``[directions]``) or per gate channel (``[directions, 4 * hidden]``); the gate order
    (input, output, forget, cell) is LSTM's."""
    from onnx import helper

    inputs = list(node.input) + [""] * (12 - len(node.input))
    weights = []
    for weight, scale, zero_point in ((inputs[1], inputs[8], inputs[9]), (inputs[2], inputs[10], inputs[11])):
        quantized = (weight, scale, zero_point, (0, 2))
        weights.append(graph.add_weight(weight, lambda q=quantized: graph.dequantized(*q).transpose(0, 2, 1)))
    lstm = helper.make_node("LSTM", [inputs[0], *weights, *inputs[3:8]], list(node.output), f"{node.name}_float")
    lstm.attribute.extend(node.attribute)
    return lstm


def _float_gather(graph: _Graph, node: onnx.NodeProto) -> tuple[onnx.NodeProto, onnx.NodeProto]:
    """A Gather of float rows for one ``Gather(quantized table) -> DequantizeLinear`` (the embeddings)."""
    from onnx import helper

    gather = graph.producer.get(node.input[0])
    if gather is None or gather.op_type != "Gather":
        raise ValueError(f"{node.name}: dequantizes no gathered table")
    zero_point = node.input[2] if len(node.input) > 2 else ""
    table = graph.add_weight(gather.input[0], lambda: graph.dequantized(gather.input[0], node.input[1], zero_point, (0,)))
    inputs = [table, *gather.input[1:]]
    float_gather = helper.make_node("Gather", inputs, list(node.output), f"{gather.name}_float")
    float_gather.attribute.extend(gather.attribute)
    return gather, float_gather


def prune(model: onnx.ModelProto) -> None:
    """Drop the nodes no graph output needs, then the initializers and value infos no node reads."""
    graph = model.graph
    producer = {output: node for node in graph.node for output in node.output}
    needed = {output.name for output in graph.output}
    kept: set[int] = set()
    pending = list(needed)
    while pending:
        node = producer.get(pending.pop())
        if node is None or id(node) in kept:
            continue
        kept.add(id(node))
        for name in node.input:
            if name and name not in needed:
                needed.add(name)
                pending.append(name)
    nodes = [node for node in graph.node if id(node) in kept]
    del graph.node[:]
    graph.node.extend(nodes)
    initializers = [tensor for tensor in graph.initializer if tensor.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    infos = [info for info in graph.value_info if info.name in needed]
    del graph.value_info[:]
    graph.value_info.extend(infos)


def dequantize(model: onnx.ModelProto) -> onnx.ModelProto:
    """The float32 graph of ONNX Runtime's dynamically quantized ``model`` (edited in place)."""
    graph = _Graph(model)
    replaced: dict[int, onnx.NodeProto | None] = {}
    for node in list(model.graph.node):
        if node.op_type in ("MatMulInteger", "ConvInteger"):
            chain, product = _float_product(graph, node)
            replaced.update({id(old): None for old in chain})
            replaced[id(chain[-1])] = product
        elif node.op_type == "DynamicQuantizeLSTM":
            replaced[id(node)] = _float_lstm(graph, node)
        elif node.op_type == "DequantizeLinear":
            gather, float_gather = _float_gather(graph, node)
            replaced[id(gather)] = None
            replaced[id(node)] = float_gather
    nodes = [replaced.get(id(node), node) for node in model.graph.node]
    del model.graph.node[:]
    model.graph.node.extend(node for node in nodes if node is not None)
    prune(model)
    left = quantized_ops(model)
    if left:
        raise ValueError(f"quantized ops left after dequantizing: {left}")
    return model


def _kept_in_float32(model: onnx.ModelProto) -> list[str]:
    """The nodes `to_float16` leaves in float32: `FLOAT32_OPS`, `FLOAT32_NODES`, those that
    make the tensors where the engine cuts the graph (the vocoder's inputs stay float32, as
    the engine windows them), and the `MOVEMENT_OPS` that read a float32 node or input."""
    cut = {VOCODER_FEATURES, VOCODER_STYLE, VOCODER_SOURCE}
    float32 = {graph_input.name for graph_input in model.graph.input}
    kept = []
    for node in model.graph.node:
        if (
            node.op_type in FLOAT32_OPS or FLOAT32_NODES.match(node.name) or cut & set(node.output)
            or (node.op_type in MOVEMENT_OPS and node.input[0] in float32)
        ):
            kept.append(node.name)
            float32.update(node.output)
    return kept


FLOAT32_INPUTS = {"Resize": (1, 2)}
"""Inputs that stay float32 in a float16 node (their schema takes float32 only)."""


def to_float16(model: onnx.ModelProto) -> onnx.ModelProto:
    """The float16 graph of a float32 ``model`` (edited in place).

    Every node computes in float16 but those `FLOAT32_OPS` and `FLOAT32_NODES` name;
    a Cast goes wherever a tensor crosses from one precision to the other, so the graph's
    inputs and outputs stay float32 and every tensor keeps its name (the durations and the
    vocoder cut of `voicestream.engine.graph` are found as before). An initializer read in
    both precisions is stored in both."""
    from onnx import TensorProto

    graph = model.graph
    kept = set(_kept_in_float32(model))
    types = _tensor_types(model)
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    half_output = {
        output for node in graph.node if node.name not in kept for output in node.output
        if types.get(output) == TensorProto.FLOAT
    }
    casts = _Casts(graph, types)
    nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        half = node.name not in kept
        for index, name in enumerate(node.input):
            if types.get(name) != TensorProto.FLOAT:
                continue
            wants_half = half and index not in FLOAT32_INPUTS.get(node.op_type, ())
            if name in initializers:
                node.input[index] = casts.half_initializer(initializers[name]) if wants_half else name
            elif wants_half != (name in half_output):
                node.input[index] = casts.cast(name, wants_half, nodes)
        if half:
            _retype_attributes(node)
        nodes.append(node)
    outputs = {output.name for output in graph.output}
    for name in outputs & half_output:
        producer = next(node for node in nodes if name in node.output)
        producer.output[list(producer.output).index(name)] = f"{name}_fp16"
        half_output.add(f"{name}_fp16")
        nodes.append(_cast_node(f"{name}_fp16", name, TensorProto.FLOAT))
    for info in graph.value_info:
        if info.name in half_output:
            info.type.tensor_type.elem_type = TensorProto.FLOAT16
    del graph.node[:]
    graph.node.extend(nodes)
    prune(model)
    return model


def _tensor_types(model: onnx.ModelProto) -> dict[str, int]:
    """The element type of each tensor: the graph's own value infos, and for the outputs it
    does not type (the LSTMs' states, a Gather) their first input's type."""
    graph = model.graph
    types = {info.name: info.type.tensor_type.elem_type for info in (*graph.input, *graph.output, *graph.value_info)}
    types |= {tensor.name: tensor.data_type for tensor in graph.initializer}
    for node in graph.node:
        for output in node.output:
            if output and output not in types and node.input[0] in types:
                types[output] = types[node.input[0]]
    return types


def _as_float16(values: np.ndarray) -> np.ndarray:
    """``values`` in float16, clipped to its finite range (a mask's -3.4e38 becomes -65504, not -inf)."""
    limit = np.finfo(np.float16).max
    return np.clip(values, -limit, limit).astype(np.float16)


def _cast_node(source: str, target: str, to: int) -> onnx.NodeProto:
    from onnx import helper

    return helper.make_node("Cast", [source], [target], f"{target}_cast", to=to)


class _Casts:
    """The casts and float16 initializers `to_float16` adds, each made once."""

    def __init__(self, graph: onnx.GraphProto, types: dict[str, int]) -> None:
        self.graph = graph
        self.types = types
        self.made: set[str] = set()

    def half_initializer(self, tensor: onnx.TensorProto) -> str:
        from onnx import numpy_helper

        name = f"{tensor.name}_fp16"
        if name not in self.made:
            self.made.add(name)
            self.graph.initializer.append(numpy_helper.from_array(_as_float16(numpy_helper.to_array(tensor)), name))
        return name

    def cast(self, name: str, half: bool, nodes: list[onnx.NodeProto]) -> str:
        from onnx import TensorProto

        target = f"{name}_fp16" if half else f"{name}_fp32"
        if target not in self.made:
            self.made.add(target)
            nodes.append(_cast_node(name, target, TensorProto.FLOAT16 if half else TensorProto.FLOAT))
        return target


def _retype_attributes(node: onnx.NodeProto) -> None:
    """A float16 node's own float32 types: a Cast to float, a ConstantOfShape's value."""
    from onnx import TensorProto, helper, numpy_helper

    for attribute in node.attribute:
        if node.op_type == "Cast" and attribute.name == "to" and attribute.i == TensorProto.FLOAT:
            attribute.i = TensorProto.FLOAT16
        elif attribute.name == "value" and attribute.t.data_type == TensorProto.FLOAT:
            value = _as_float16(numpy_helper.to_array(attribute.t))
            attribute.CopyFrom(helper.make_attribute("value", numpy_helper.from_array(value, attribute.t.name)))


def float32_nodes(model: onnx.ModelProto, names: Iterable[str]) -> list[str]:
    """Of the nodes named, those whose every float input and output is float32 in ``model``."""
    from onnx import TensorProto

    types = {info.name: info.type.tensor_type.elem_type for info in (*model.graph.value_info, *model.graph.input)}
    types |= {tensor.name: tensor.data_type for tensor in model.graph.initializer}
    by_name = {node.name: node for node in model.graph.node}
    float32 = []
    for name in names:
        node = by_name.get(name)
        if node and all(types.get(t) != TensorProto.FLOAT16 for t in (*node.input, *node.output)):
            float32.append(name)
    return float32


def write_model(model: onnx.ModelProto, target: Path) -> None:
    """Save ``model`` at ``target`` atomically: a reader never sees half a file."""
    import onnx

    partial = target.with_name(f"{target.name}.partial")
    onnx.save(model, str(partial))
    os.replace(partial, target)


def derive_model(variant: str, source: Path, target: Path, progress: Progress | None = None) -> float:
    """Write the ``variant`` (fp32 or fp16) model derived from ``source`` (the int8 model for
    fp32, the fp32 model for fp16) at ``target``; returns the seconds it took."""
    import onnx

    started = time.perf_counter()
    description = f"Deriving Kokoro-82M {variant} from {source.parent.name}"
    total = source.stat().st_size
    report = progress or (lambda _description, _done, _total: None)
    report(description, 0, total)
    model = onnx.load(str(source))
    report(description, total // 4, total)
    if variant == "fp32":
        model = dequantize(model)
    elif variant == "fp16":
        model = to_float16(model)
    else:
        raise ValueError(f"cannot derive {variant!r}: only fp32 and fp16")
    report(description, total // 2, total)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_model(model, target)
    report(description, total, total)
    return time.perf_counter() - started
