"""The model graph as the engine runs it: the waveform, each token's duration in frames,
and the graph cut in two where the vocoder starts.

Kokoro predicts how many frames (600 samples at 24 kHz) each input token lasts, and word
timestamps come from those durations. hexgrad's ``KModelForONNX`` export returns them as a
``duration`` output and onnx-community's "timestamped" exports as ``durations``; the int8
model we ship returns only the waveform, but computes them as ``/encoder/Cast_output_0``
(int64, [1, tokens], after rounding and clipping: their sum × 600 is the audio's length).
That tensor is added as a second graph output in memory when the model is loaded; the file
on disk stays as shipped, so its sha256 check still holds.

Nine tenths of a run is the vocoder (the iSTFTNet generator: 1,240 of 1,374 ms of a
3.35 s sentence on two cores, ONNX Runtime's profiler), and it is convolutional over time.
So the graph is also cut, in memory, into a **front** (tokens, style, speed -> the
generator's features, its half of the style, the harmonic source's spectrum over the whole
piece, and the durations) and a **vocoder** (those three -> audio). The two run one after
the other give the whole model's audio bit for bit; the vocoder run on a window of frames
gives that window's audio (`voicestream.engine.vocoder`), so a piece's first audio no
longer waits for its whole length. A graph whose cut tensors are not there (another
export) runs whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

FRAME_SAMPLES = 600
"""Samples of 24 kHz audio per predicted frame."""
DURATION_OUTPUTS = ("duration", "durations")
ENCODER_DURATIONS = "/encoder/Cast_output_0"
VOCODER_FEATURES = "/decoder/decoder/decode.3/Div_4_output_0"
"""The generator's input features, [1, 512, frames]: two per predicted frame (300 samples each)."""
VOCODER_STYLE = "/decoder/Slice_output_0"
"""The acoustic half of the style vector, [1, 128]."""
VOCODER_SOURCE = "/decoder/decoder/generator/Concat_3_output_0"
"""The harmonic source's magnitude and phase, [1, 22, 60 per feature frame + 1]: made from
the whole piece's pitch, so that a window's source keeps the phase of the whole."""


@dataclass(frozen=True)
class SplitGraph:
    """The model cut where the vocoder starts (serialized ONNX models)."""

    front: bytes
    vocoder: bytes


@dataclass(frozen=True)
class ModelGraph:
    """What to hand ONNX Runtime (a path, or the serialized graph with the added output),
    the name of the durations output (None when the graph has none) and the graph cut at
    the vocoder (None when this export has no such cut)."""

    model: str | bytes
    durations: str | None
    split: SplitGraph | None = None


def load_graph(model_path: Path) -> ModelGraph:
    """The model at ``model_path`` with its token durations exposed as an output, if it has
    them, and cut at the vocoder where it can be."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(model_path))
    outputs = [output.name for output in model.graph.output]
    durations = next((name for name in DURATION_OUTPUTS if name in outputs), None)
    if durations is None and any(ENCODER_DURATIONS in node.output for node in model.graph.node):
        model.graph.output.append(helper.make_tensor_value_info(ENCODER_DURATIONS, TensorProto.INT64, [1, None]))
        durations = ENCODER_DURATIONS
    split = _split(model, durations)
    if durations == ENCODER_DURATIONS:
        return ModelGraph(model.SerializeToString(), durations, split)
    return ModelGraph(str(model_path), durations, split)


def _split(model: object, durations: str | None) -> SplitGraph | None:
    """The front and vocoder halves, or None when the cut tensors or the durations are missing."""
    from onnx.utils import Extractor

    produced = {output for node in model.graph.node for output in node.output}  # type: ignore[attr-defined]
    cut = (VOCODER_FEATURES, VOCODER_STYLE, VOCODER_SOURCE)
    if durations is None or not all(name in produced for name in cut):
        return None
    audio = model.graph.output[0].name  # type: ignore[attr-defined]
    inputs = [graph_input.name for graph_input in model.graph.input]  # type: ignore[attr-defined]
    extractor = Extractor(model)
    front = extractor.extract_model(inputs, [*cut, durations])
    vocoder = extractor.extract_model(list(cut), [audio])
    if any(graph_input.name not in cut for graph_input in vocoder.graph.input):
        return None  # the vocoder reaches back past the cut: this export is not ours to cut
    return SplitGraph(front.SerializeToString(), vocoder.SerializeToString())
