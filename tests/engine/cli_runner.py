"""``voicestream`` run in process on the session's engine: the real Typer app and commands,
without loading the model again for each command (four to six seconds apiece)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from typer.testing import CliRunner

from voicestream.cli import app
from voicestream.engine import KokoroEngine


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


Cli = Callable[..., Ran]


@pytest.fixture
def run_cli(engine: KokoroEngine, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """Runs ``voicestream ARGS`` in process; the commands that load a model get the session's."""
    commands = importlib.import_module("voicestream.cli.app")  # the module, not the Typer app it exports
    monkeypatch.setattr(commands, "load_engine", lambda *args, **kwargs: engine)
    monkeypatch.setattr(engine, "max_text_chars", engine.max_text_chars)  # `say` may raise it
    runner = CliRunner()

    def run(*args: str, stdin: str | None = None) -> Ran:
        result = runner.invoke(app, list(args), input=stdin, prog_name="voicestream", env={"COLUMNS": "200"})
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return Ran(result.exit_code, result.stdout, result.stderr)

    return run
