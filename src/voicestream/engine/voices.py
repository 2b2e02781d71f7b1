"""Voice packs: one ``<name>.bin`` per voice, 510 style rows of 256 float32 each.

Row ``n - 1`` is the style for an input of ``n`` phonemes, as Kokoro was trained. A blend
(``af_bella(2)+af_sky(1)``) is the weighted mean of its voices' packs, row by row, as
other Kokoro servers mix them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from voicestream.catalog import VoiceBlend, parse_voice

STYLE_ROWS = 510
STYLE_DIM = 256
MAX_CACHED_BLENDS = 32
"""Mixed packs kept in memory (0.5 MB each); the least recently used goes first."""


class VoiceBank:
    """Lazily loaded voice packs from a folder, and the blends made of them."""

    def __init__(self, directory: Path) -> None:
        self._paths = {p.stem: p for p in sorted(directory.glob("*.bin"))}
        self._loaded: dict[str, np.ndarray] = {}
        self._blends: OrderedDict[VoiceBlend, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.names = sorted(self._paths)

    def __contains__(self, name: object) -> bool:
        return name in self._paths

    def pack(self, name: str) -> np.ndarray:
        """The whole pack as a (510, 1, 256) array."""
        if name not in self._loaded:
            data = np.fromfile(self._paths[name], dtype=np.float32)
            self._loaded[name] = data.reshape(-1, 1, STYLE_DIM)
        return self._loaded[name]

    def blended_pack(self, blend: VoiceBlend) -> np.ndarray:
        """The weighted mean of the blend's packs (the pack itself for a single voice)."""
        if blend.is_single:
            return self.pack(blend.names[0])
        with self._lock:
            if blend in self._blends:
                self._blends.move_to_end(blend)
                return self._blends[blend]
        packs = [self.pack(name) for name in blend.names]
        rows = min(len(pack) for pack in packs)
        mixed = sum(weight * pack[:rows] for weight, pack in zip(blend.weights, packs, strict=True))
        mixed = np.asarray(mixed, dtype=np.float32)
        with self._lock:
            self._blends[blend] = mixed
            while len(self._blends) > MAX_CACHED_BLENDS:
                self._blends.popitem(last=False)
        return mixed

    def style(self, voice: str, phoneme_count: int) -> np.ndarray:
        """The (1, 256) style row of a voice or blend for an input of ``phoneme_count`` phonemes."""
        pack = self.blended_pack(parse_voice(voice))
        return pack[min(max(phoneme_count, 1), len(pack)) - 1]
