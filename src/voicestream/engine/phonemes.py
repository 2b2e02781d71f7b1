"""Grapheme-to-phoneme with espeak-ng (through phonemizer and espeakng-loader) and Kokoro's vocabulary.

espeak-ng keeps process-global state, so every call goes through one lock; the backend is
built once because building it per call costs more than phonemizing a sentence.
"""

from __future__ import annotations

import importlib.resources
import json
import logging
import re
import threading
from functools import cached_property

MAX_PHONEMES = 510
"""Kokoro's context: 512 tokens less the two padding tokens."""

_SENTENCE_CUT = re.compile(r"(?<=[.!?…])\s+")
_CLAUSE_CUT = re.compile(r"(?<=[,;:—])\s+")
_WORD_CUT = re.compile(r"\s+")


def load_vocab() -> dict[str, int]:
    text = importlib.resources.files("voicestream.engine").joinpath("vocab.json").read_text(encoding="utf-8")
    return json.loads(text)["vocab"]


class Phonemizer:
    """Text to Kokoro token ids, one language per instance."""

    def __init__(self, language: str = "en-us") -> None:
        self.language = language
        self.vocab = load_vocab()
        self._lock = threading.Lock()

    @cached_property
    def _backend(self):
        import espeakng_loader
        from phonemizer.backend import EspeakBackend
        from phonemizer.backend.espeak.wrapper import EspeakWrapper

        EspeakWrapper.set_library(espeakng_loader.get_library_path())
        EspeakWrapper.set_data_path(espeakng_loader.get_data_path())
        quiet = logging.getLogger("phonemizer")
        quiet.setLevel(logging.ERROR)  # punctuation makes it warn about word counts on every line
        return EspeakBackend(
            self.language, preserve_punctuation=True, with_stress=True,
            language_switch="remove-flags", logger=quiet,
        )

    def phonemize(self, text: str) -> str:
        """IPA phonemes of ``text``, restricted to the symbols Kokoro knows, whitespace collapsed."""
        with self._lock:
            raw = self._backend.phonemize([text], strip=True)[0]
        known = "".join(p for p in raw if p in self.vocab)
        return " ".join(known.split())

    def tokenize(self, phonemes: str) -> list[int]:
        return [self.vocab[p] for p in phonemes if p in self.vocab]


def split_phonemes(phonemes: str, limit: int = MAX_PHONEMES) -> list[str]:
    """Cut a phoneme string into pieces within the model's window.

    Cuts at sentence marks first, then clause marks, then spaces; only a single unbroken
    run longer than the window is sliced, so nothing is ever dropped.
    """
    phonemes = phonemes.strip()
    if len(phonemes) <= limit:
        return [phonemes] if phonemes else []
    for pattern in (_SENTENCE_CUT, _CLAUSE_CUT, _WORD_CUT):
        atoms = [a for a in pattern.split(phonemes) if a]
        if len(atoms) > 1:
            return _pack([piece for atom in atoms for piece in split_phonemes(atom, limit)], limit)
    return [phonemes[i : i + limit] for i in range(0, len(phonemes), limit)]


def _pack(atoms: list[str], limit: int) -> list[str]:
    """Join neighbouring atoms greedily while they fit, so there are few, long batches."""
    batches: list[str] = []
    for atom in atoms:
        if batches and len(batches[-1]) + 1 + len(atom) <= limit:
            batches[-1] = f"{batches[-1]} {atom}"
        else:
            batches.append(atom)
    return batches
