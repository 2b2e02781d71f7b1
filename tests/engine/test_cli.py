"""The command line. One test runs it as a user does, a real process (the entry point, the
model loaded from the cache); the others run the same commands in process on the session's
engine (``run_cli``, tests/engine/cli_runner.py)."""

from __future__ import annotations

import subprocess
import sys
import wave
from pathlib import Path

import pytest
from tests.engine.cli_runner import Cli
from tests.reference import HELLO_SECONDS

from voicestream.audio import decode_audio
from voicestream.engine.offline import synthesize


def test_say_as_a_process_writes_the_reference_wav(tmp_path: Path) -> None:
    target = tmp_path / "hello.wav"
    result = subprocess.run(
        [sys.executable, "-m", "voicestream.cli", "say", "Hello there.", "-o", str(target), "--voice", "af_heart"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stderr
    with wave.open(str(target)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (24000, 1, 2)
        assert wav.getnframes() / 24000 == pytest.approx(HELLO_SECONDS, rel=0.03)


@pytest.mark.parametrize(("name", "format", "rate"), [("a.mp3", "mp3", 44100), ("a.flac", "flac", 16000),
                                                      ("a.ogg", "opus", 48000), ("a.ulaw", "mulaw", 8000)])
def test_say_other_formats_and_rates(run_cli: Cli, tmp_path: Path, name: str, format: str, rate: int) -> None:
    target = tmp_path / name
    result = run_cli("say", "Hello there.", "-o", str(target), "--sample-rate", str(rate))
    assert result.returncode == 0, result.stderr
    samples, decoded_rate = decode_audio(target.read_bytes(), format, rate)
    assert decoded_rate == rate
    assert len(samples) / decoded_rate == pytest.approx(HELLO_SECONDS, abs=0.1)


@pytest.mark.parametrize(("args", "expected"), [
    (["--voice", "zz_nobody"], "af_heart"),
    (["--speed", "3"], "between 0.5 and 2.0"),
    (["--format", "wma"], "mp3"),
    (["--sample-rate", "11025"], "24000"),
    (["--lang", "tlh"], "pt-br"),
    (["--voice", "af_bella+ef_dora"], "(en-us, es)"),
])
def test_say_bad_options_are_clear_errors(run_cli: Cli, tmp_path: Path, args: list[str], expected: str) -> None:
    result = run_cli("say", "Hi.", "-o", str(tmp_path / "x.wav"), *args)
    assert result.returncode == 2
    assert expected in result.stderr and "Traceback" not in result.stderr


LONG_TEXT = "One sentence here. Another one there. A third to finish."


def wav_seconds(path: Path) -> float:
    with wave.open(str(path)) as wav:
        return wav.getnframes() / wav.getframerate()


def test_say_reads_a_file_and_standard_input_in_parallel_pieces(run_cli: Cli, tmp_path: Path, engine) -> None:
    source = tmp_path / "text.txt"
    source.write_text(LONG_TEXT + "\n")
    from_file, from_stdin = tmp_path / "file.wav", tmp_path / "stdin.wav"
    assert run_cli("say", "--file", str(source), "-o", str(from_file)).returncode == 0
    result = run_cli("say", "-", "-o", str(from_stdin), stdin=LONG_TEXT)
    assert result.returncode == 0, result.stderr
    expected = synthesize(engine, LONG_TEXT).size / engine.sample_rate  # rendered one piece after another
    assert wav_seconds(from_file) == pytest.approx(expected, rel=0.02)
    assert wav_seconds(from_stdin) == pytest.approx(expected, rel=0.02)


def test_say_text_source_errors(run_cli: Cli, tmp_path: Path) -> None:
    missing = run_cli("say", "--file", str(tmp_path / "nope.txt"), "-o", str(tmp_path / "x.wav"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr and "Traceback" not in missing.stderr
    both = run_cli("say", "Hi.", "--file", str(tmp_path / "nope.txt"), "-o", str(tmp_path / "x.wav"))
    assert both.returncode == 2 and "not both" in both.stderr


def test_say_empty_text(run_cli: Cli, tmp_path: Path) -> None:
    result = run_cli("say", "", "-o", str(tmp_path / "x.wav"))
    assert result.returncode == 2 and "empty" in result.stderr


def test_voices_lists_all_54_with_language_and_gender(run_cli: Cli) -> None:
    result = run_cli("voices")
    assert result.returncode == 0
    rows = [line.split() for line in result.stdout.splitlines()]
    assert len(rows) == 54
    assert ["af_heart", "en-us", "female"] in rows and ["jm_kumo", "ja", "male"] in rows


def test_models_list_shows_the_cache(run_cli: Cli) -> None:
    result = run_cli("models", "list")
    assert result.returncode == 0 and "int8" in result.stdout

