"""Voice packs: one ``<name>.bin`` per voice, 510 style rows of 256 float32 each.

Row ``n - 1`` is the style for an input of ``n`` phonemes, as Kokoro was trained.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

STYLE_ROWS = 510
STYLE_DIM = 256


class VoiceBank:
    """Lazily loaded voice packs from a folder."""

    def __init__(self, directory: Path) -> None:
        self._paths = {p.stem: p for p in sorted(directory.glob("*.bin"))}
        self._loaded: dict[str, np.ndarray] = {}
        self.names = sorted(self._paths)

    def __contains__(self, name: object) -> bool:
        return name in self._paths

    def pack(self, name: str) -> np.ndarray:
        """The whole pack as a (510, 1, 256) array."""
        if name not in self._loaded:
            data = np.fromfile(self._paths[name], dtype=np.float32)
            self._loaded[name] = data.reshape(-1, 1, STYLE_DIM)
        return self._loaded[name]

    def style(self, name: str, phoneme_count: int) -> np.ndarray:
        """The (1, 256) style row for an input of ``phoneme_count`` phonemes."""
        pack = self.pack(name)
        return pack[min(max(phoneme_count, 1), len(pack)) - 1]
