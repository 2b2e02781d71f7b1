"""Pronunciation dictionaries the vendors' clients upload (ElevenLabs, Cartesia), kept on disk.

A dictionary is a lexicon (`voicestream.text.lexicon`) with an id, a name and a version, made
from a PLS file or from rules (ElevenLabs' ``add-from-file`` and ``add-from-rules``, Cartesia's
``items``), and named by a request (``pronunciation_dictionary_locators``,
``pronunciation_dict_id``): its entries are applied to that request's text before the G2P,
after the server's own lexicons (`SpeechCore.check`). Each is a JSON file in one directory
beside the cache (``VOICESTREAM_CACHE``/pronunciation-dictionaries, or the server's
``dictionaries_dir``), written atomically, so they outlive a restart. There are at most
`MAX_DICTIONARIES`, each of at most `MAX_DICTIONARY_BYTES` as uploaded; past either bound an
upload is refused with a typed error and nothing is written.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from voicestream.engine.phonemes import load_vocab
from voicestream.text.lexicon import Entry, Lexicon, LexiconError

MAX_DICTIONARIES = 100
MAX_DICTIONARY_BYTES = 1024 * 1024
"""The largest PLS file or set of rules one dictionary may be made from."""
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class DictionaryError(ValueError):
    """An upload or a lookup that cannot be served: the message says why; ``missing`` for an
    id no dictionary has."""

    def __init__(self, message: str, missing: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.missing = missing


@dataclass(frozen=True)
class Dictionary:
    id: str
    name: str
    version_id: str
    created_at: float
    """Unix seconds."""
    description: str
    entries: tuple[Entry, ...]

    @property
    def lexicon(self) -> Lexicon:
        return Lexicon(self.entries)

    def to_json(self) -> str:
        data = asdict(self)
        data["entries"] = [asdict(entry) for entry in self.entries]
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Dictionary:
        data = json.loads(text)
        data["entries"] = tuple(Entry(**entry) for entry in data["entries"])
        return cls(**data)


class PronunciationDictionaries:
    """The dictionaries of one server, in ``root`` (read once, on first use)."""

    def __init__(self, root: Path, max_count: int = MAX_DICTIONARIES, max_bytes: int = MAX_DICTIONARY_BYTES) -> None:
        self.root = root
        self.max_count = max_count
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._loaded: dict[str, Dictionary] | None = None

    def _all(self) -> dict[str, Dictionary]:
        if self._loaded is None:
            loaded: dict[str, Dictionary] = {}
            for path in sorted(self.root.glob("*.json")) if self.root.is_dir() else []:
                try:
                    dictionary = Dictionary.from_json(path.read_text(encoding="utf-8"))
                except (OSError, ValueError, TypeError, KeyError):
                    continue  # a file that is not one of ours
                if dictionary.id != path.stem or not valid_id(dictionary.id):
                    continue
                loaded[dictionary.id] = dictionary
            self._loaded = loaded
        return self._loaded

    def list(self) -> list[Dictionary]:
        with self._lock:
            return sorted(self._all().values(), key=lambda d: d.created_at)

    def get(self, dictionary_id: str) -> Dictionary:
        with self._lock:
            found = self._all().get(dictionary_id)
        if found is None:
            raise DictionaryError(f"No pronunciation dictionary {dictionary_id!r} on this server.", missing=True)
        return found

    def add_pls(self, name: str, document: bytes, description: str = "") -> Dictionary:
        """A dictionary from a PLS file (ElevenLabs' ``add-from-file``)."""
        self._check_size(len(document))
        try:
            lexicon = Lexicon.from_pls(document, f"dictionary {name!r}")
        except LexiconError as error:
            raise DictionaryError(error.message) from None
        return self._add(name, lexicon.entries, description)

    def add_entries(self, name: str, entries: Iterable[Entry], size: int, description: str = "") -> Dictionary:
        """A dictionary from rules already read (ElevenLabs' ``add-from-rules``, Cartesia's items);
        ``size`` is the bytes they came in."""
        self._check_size(size)
        return self._add(name, list(entries), description)

    def remove(self, dictionary_id: str) -> None:
        self.get(dictionary_id)
        with self._lock:
            (self.root / f"{dictionary_id}.json").unlink(missing_ok=True)
            self._all().pop(dictionary_id, None)

    def lexicon(self, ids: Sequence[str]) -> Lexicon | None:
        """The dictionaries ``ids`` as one lexicon (later ones win); None for none. Raises
        `DictionaryError` for an id no dictionary has."""
        if not ids:
            return None
        lexicon = Lexicon()
        for dictionary_id in ids:
            lexicon = lexicon + self.get(dictionary_id).lexicon
        return lexicon

    def _check_size(self, size: int) -> None:
        if size > self.max_bytes:
            raise DictionaryError(f"A pronunciation dictionary may be at most {self.max_bytes} bytes; this one has {size}.")

    def _add(self, name: str, entries: list[Entry], description: str) -> Dictionary:
        if not name.strip():
            raise DictionaryError("A pronunciation dictionary needs a name.")
        try:
            Lexicon(entries).check(load_vocab())
        except LexiconError as error:
            raise DictionaryError(error.message) from None
        dictionary = Dictionary(secrets.token_hex(10), name.strip()[:200], secrets.token_hex(10), time.time(),
                                description[:1000], tuple(entries))
        with self._lock:
            known = self._all()
            if len(known) >= self.max_count:
                raise DictionaryError(
                    f"This server keeps at most {self.max_count} pronunciation dictionaries; it has them all."
                )
            self.root.mkdir(parents=True, exist_ok=True)
            path = self.root / f"{dictionary.id}.json"
            partial = path.with_suffix(".tmp")
            partial.write_text(dictionary.to_json(), encoding="utf-8")
            os.replace(partial, path)
            known[dictionary.id] = dictionary
        return dictionary


def valid_id(dictionary_id: str) -> bool:
    """Whether ``dictionary_id`` could be one of ours (it names a file)."""
    return _ID.fullmatch(dictionary_id) is not None
