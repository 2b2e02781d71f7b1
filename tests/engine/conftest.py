"""The engine tests' fixtures: ``run_cli`` (the command line in process)."""

from tests.engine.cli_runner import run_cli  # noqa: F401 - a fixture, registered by importing it
