"""The model graph as the engine runs it: the waveform, and each token's duration in frames.

Kokoro predicts how many frames (600 samples at 24 kHz) each input token lasts, and word
timestamps come from those durations. hexgrad's ``KModelForONNX`` export returns them as a
``duration`` output and onnx-community's "timestamped" exports as ``durations``; the int8
model we ship returns only the waveform, but computes them as ``/encoder/Cast_output_0``
(int64, [1, tokens], after rounding and clipping: their sum × 600 is the audio's length).
That tensor is added as a second graph output in memory when the model is loaded; the file
on disk stays as shipped, so its sha256 check still holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

FRAME_SAMPLES = 600
"""Samples of 24 kHz audio per predicted frame."""
DURATION_OUTPUTS = ("duration", "durations")
ENCODER_DURATIONS = "/encoder/Cast_output_0"


@dataclass(frozen=True)
class ModelGraph:
    """What to hand ONNX Runtime (a path, or the serialized graph with the added output)
    and the name of the durations output (None when the graph has none)."""

    model: str | bytes
    durations: str | None


def load_graph(model_path: Path) -> ModelGraph:
    """The model at ``model_path`` with its token durations exposed as an output, if it has them."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(model_path))
    outputs = [output.name for output in model.graph.output]
    if own := next((name for name in DURATION_OUTPUTS if name in outputs), None):
        return ModelGraph(str(model_path), own)
    if not any(ENCODER_DURATIONS in node.output for node in model.graph.node):
        return ModelGraph(str(model_path), None)
    model.graph.output.append(helper.make_tensor_value_info(ENCODER_DURATIONS, TensorProto.INT64, [1, None]))
    return ModelGraph(model.SerializeToString(), ENCODER_DURATIONS)
