"""The model graph as the engine runs it: the waveform, each token's duration in frames,
and the graph cut in two where the vocoder starts.

Kokoro predicts how many frames (600 samples at 24 kHz) each input token lasts, and word
timestamps come from those durations. hexgrad's ``KModelForONNX`` export returns them as a
``duration`` output and onnx-community's "timestamped" exports as ``durations``; the int8
model we ship returns only the waveform, but computes them as ``/encoder/Cast_output_0``
(int64, [1, tokens], after rounding and clipping: their sum × 600 is the audio's length).
That tensor is added as a second graph output when the model is loaded; the file on disk
stays as shipped, so its sha256 check still holds.

Nine tenths of a run is the vocoder (the iSTFTNet generator: 1,240 of 1,374 ms of a
3.35 s sentence on two cores, ONNX Runtime's profiler), and it is convolutional over time.
So the graph is also cut, in memory, into a **front** (tokens, style, speed -> the
generator's features, its half of the style, the harmonic source's spectrum over the whole
piece, and the durations) and a **vocoder** (those three -> audio). The two run one after
the other give the whole model's audio bit for bit; the vocoder run on a window of frames
gives that window's audio (`voicestream.engine.vocoder`), so a piece's first audio no
longer waits for its whole length. A graph whose cut tensors are not there (another
export) runs whole.

Editing and cutting the graph (0.6 s of CPU on two cores) and ONNX Runtime's optimization
of the engine's six sessions (1.2 s) were a third of a server's start. So on the CPU the
edited graphs are kept in the voicestream cache (``graphs/``), each already optimized by
ONNX Runtime at its extended level (fusions that hold on any CPU; the hardware-specific
layout changes are made again at each load), keyed by the model file's path, size and
mtime and ONNX Runtime's version. A later load hands ONNX Runtime those files: the same
audio, bit for bit, and the engine made in 0.9 s of CPU instead of 1.7 (176 MB of disk for
the int8 model). An entry is written whole (in a folder of its own, renamed into place) or
not at all; a cache that cannot be written only costs the time.

On a CPU whose uint8 x int8 products are exact (VNNI), the edit also turns the model's
convolutions into matrix products that run on those instructions
(`voicestream.engine.conv_gemm`): the same audio, bit for bit, for about a third less CPU.
Whether it did is part of the cache key, so a cache copied to another CPU is not misread.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from voicestream.engine.cache import cache_root
from voicestream.engine.conv_gemm import convs_as_gemms, exact_on_this_cpu

log = logging.getLogger(__name__)

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

CPU_ONLY = ("CPUExecutionProvider",)
GRAPH_CACHE_FORMAT = 2
"""Part of each cache key: raised when the edit or the cut changes, so old entries go unused."""
MANIFEST = "graph.json"
"""Written last into a cache entry: the source model, the durations output and each file's size."""


@dataclass(frozen=True)
class SplitGraph:
    """The model cut where the vocoder starts (paths, or serialized ONNX models)."""

    front: str | bytes
    vocoder: str | bytes


@dataclass(frozen=True)
class ModelGraph:
    """What to hand ONNX Runtime (a path, or the serialized graph with the added output),
    the name of the durations output (None when the graph has none) and the graph cut at
    the vocoder (None when this export has no such cut)."""

    model: str | bytes
    durations: str | None
    split: SplitGraph | None = None


def load_graph(model_path: Path, providers: Sequence[str] = CPU_ONLY) -> ModelGraph:
    """The model at ``model_path`` with its token durations exposed as an output, if it has
    them, and cut at the vocoder where it can be: from the cache when the sessions run on
    the CPU alone (an optimized graph holds for the execution providers it was made for)."""
    if tuple(providers) != CPU_ONLY:
        return edit_graph(model_path, gemm_convs=False)
    cached = _cached(model_path)
    if cached is not None:
        return cached
    graph = edit_graph(model_path, gemm_convs=exact_on_this_cpu())
    return _store(model_path, graph) or graph


def graph_cache_root() -> Path:
    return cache_root() / "graphs"


def _key(model_path: Path) -> str:
    import onnxruntime as ort

    stat = model_path.stat()
    identity = [
        GRAPH_CACHE_FORMAT, str(model_path.resolve()), stat.st_size, stat.st_mtime_ns, ort.__version__, exact_on_this_cpu()
    ]
    return hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:32]


def _cached(model_path: Path) -> ModelGraph | None:
    """The cache's entry for this model, or None; an entry whose files are not as written
    is removed (and made again by the caller)."""
    entry = graph_cache_root() / _key(model_path)
    try:
        manifest = json.loads((entry / MANIFEST).read_text())
        paths = {name: entry / f"{name}.onnx" for name in manifest["files"]}
        if any(paths[name].stat().st_size != size for name, size in manifest["files"].items()):
            raise ValueError(f"a file of {entry} is not the size it was written with")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as error:
        log.warning("the graph cache entry %s is damaged (%s): made again", entry, error)
        shutil.rmtree(entry, ignore_errors=True)
        return None
    split = SplitGraph(str(paths["front"]), str(paths["vocoder"])) if "front" in paths else None
    return ModelGraph(str(paths["model"]), manifest["durations"], split)


def _store(model_path: Path, graph: ModelGraph) -> ModelGraph | None:
    """Write ``graph``'s models into the cache, each as ONNX Runtime optimizes it at its
    extended level, and return the entry; None (logged) when the cache cannot take it."""
    import onnxruntime as ort

    models = {"model": graph.model}
    if graph.split is not None:
        models |= {"front": graph.split.front, "vocoder": graph.split.vocoder}
    root = graph_cache_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".partial-", dir=root))
        try:
            for name, model in models.items():
                options = ort.SessionOptions()
                options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
                options.intra_op_num_threads = 1
                options.log_severity_level = 3
                options.optimized_model_filepath = str(staging / f"{name}.onnx")
                ort.InferenceSession(model, options, providers=list(CPU_ONLY))
            sizes = {name: (staging / f"{name}.onnx").stat().st_size for name in models}
            stat = model_path.stat()
            source = {"path": str(model_path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
            (staging / MANIFEST).write_text(json.dumps({"source": source, "durations": graph.durations, "files": sizes}))
            _remove_outdated(root)
            try:
                staging.rename(root / _key(model_path))
            except OSError:
                pass  # another process stored the same entry first
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as error:  # a read-only or full cache
        log.warning("cannot keep the edited model graph in %s (%s): it is edited again at each load", root, error)
        return None
    except Exception:
        log.exception("could not keep the edited model graph in %s; it is edited again at each load", root)
        return None
    return _cached(model_path)


def _remove_outdated(root: Path) -> None:
    """Drop the entries whose model file has changed or gone: no key can reach them again
    (an entry of another ONNX Runtime version stays, for the environment that has it)."""
    for manifest in root.glob(f"*/{MANIFEST}"):
        try:
            source = json.loads(manifest.read_text())["source"]
            path = Path(source["path"])
            stat = path.stat() if path.exists() else None
            if stat is None or (stat.st_size, stat.st_mtime_ns) != (source["size"], source["mtime_ns"]):
                shutil.rmtree(manifest.parent, ignore_errors=True)
        except (OSError, ValueError, KeyError, TypeError):
            continue


def edit_graph(model_path: Path, gemm_convs: bool) -> ModelGraph:
    """The model with its durations output added, its convolutions as VNNI matrix products
    if ``gemm_convs`` (only where they are exact: `conv_gemm.exact_on_this_cpu`), and cut at
    the vocoder, in memory."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(model_path))
    rewritten = convs_as_gemms(model) if gemm_convs else 0
    outputs = [output.name for output in model.graph.output]
    durations = next((name for name in DURATION_OUTPUTS if name in outputs), None)
    if durations is None and any(ENCODER_DURATIONS in node.output for node in model.graph.node):
        model.graph.output.append(helper.make_tensor_value_info(ENCODER_DURATIONS, TensorProto.INT64, [1, None]))
        durations = ENCODER_DURATIONS
    split = _split(model, durations)
    if durations == ENCODER_DURATIONS or rewritten:
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
