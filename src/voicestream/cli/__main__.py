"""``python -m voicestream.cli``: the same command line as the ``voicestream`` script."""

from voicestream.cli import app

app()
