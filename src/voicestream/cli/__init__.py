"""The ``voicestream`` command line."""

from voicestream.cli.app import app

__all__ = ["app"]
