"""The command line, run as a user runs it: a real process."""

from __future__ import annotations

import subprocess
import sys
import wave
from pathlib import Path

import pytest

from voicestream.audio import decode_audio


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "voicestream.cli", *args], capture_output=True, text=True, timeout=300, check=False
    )


def test_say_writes_the_reference_wav(tmp_path: Path) -> None:
    target = tmp_path / "hello.wav"
    result = run_cli("say", "Hello there.", "-o", str(target), "--voice", "af_heart")
    assert result.returncode == 0, result.stderr
    with wave.open(str(target)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (24000, 1, 2)
        assert wav.getnframes() / 24000 == pytest.approx(1.525, rel=0.03)


@pytest.mark.parametrize(("name", "format", "rate"), [("a.mp3", "mp3", 44100), ("a.flac", "flac", 16000),
                                                      ("a.ogg", "opus", 48000), ("a.ulaw", "mulaw", 8000)])
def test_say_other_formats_and_rates(tmp_path: Path, name: str, format: str, rate: int) -> None:
    target = tmp_path / name
    result = run_cli("say", "Hello there.", "-o", str(target), "--sample-rate", str(rate))
    assert result.returncode == 0, result.stderr
    samples, decoded_rate = decode_audio(target.read_bytes(), format, rate)
    assert decoded_rate == rate
    assert len(samples) / decoded_rate == pytest.approx(1.525, abs=0.1)


@pytest.mark.parametrize(("args", "expected"), [
    (["--voice", "zz_nobody"], "af_heart"),
    (["--speed", "3"], "between 0.5 and 2.0"),
    (["--format", "wma"], "mp3"),
    (["--sample-rate", "11025"], "24000"),
])
def test_say_bad_options_are_clear_errors(tmp_path: Path, args: list[str], expected: str) -> None:
    result = run_cli("say", "Hi.", "-o", str(tmp_path / "x.wav"), *args)
    assert result.returncode == 2
    assert expected in result.stderr and "Traceback" not in result.stderr


def test_say_empty_text(tmp_path: Path) -> None:
    result = run_cli("say", "", "-o", str(tmp_path / "x.wav"))
    assert result.returncode == 2 and "empty" in result.stderr


def test_voices_lists_all_54() -> None:
    result = run_cli("voices")
    assert result.returncode == 0
    assert len(result.stdout.split()) == 54 and "af_heart" in result.stdout.split()


def test_models_list_shows_the_cache() -> None:
    result = run_cli("models", "list")
    assert result.returncode == 0 and "int8" in result.stdout


def test_every_command_has_help() -> None:
    for command in ([], ["say"], ["voices"], ["serve"], ["demo"], ["models"], ["models", "pull"], ["models", "list"]):
        result = run_cli(*command, "--help")
        assert result.returncode == 0 and "Usage" in result.stdout
