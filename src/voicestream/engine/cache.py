"""The voicestream cache: where the engine keeps what it fetches and builds, the weights of
each variant (`voicestream.engine.weights`) and the edited model graphs
(`voicestream.engine.graph`)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The voicestream cache: ``VOICESTREAM_CACHE``, else ``$XDG_CACHE_HOME/voicestream``."""
    if explicit := os.environ.get("VOICESTREAM_CACHE"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "voicestream"
