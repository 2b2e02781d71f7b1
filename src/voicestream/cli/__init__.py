"""The ``voicestream`` command line."""

from voicestream.cli import agent_commands as _agent_commands  # noqa: F401 - registers its commands
from voicestream.cli import bench_commands as _bench_commands  # noqa: F401 - registers its commands
from voicestream.cli.app import app

__all__ = ["app"]
