"""Grapheme-to-phoneme per language, and Kokoro's vocabulary.

Kokoro's voices were trained on the phonemes of Kokoro's own pipeline, so each language
goes through the G2P that pipeline uses: espeak-ng (through phonemizer and espeakng-loader)
for English, Spanish, French, Hindi, Italian and Portuguese, and ``misaki`` for Japanese
(OpenJTalk's dictionary through fugashi and unidic-lite) and Chinese (jieba and pypinyin).

Each language's G2P is built once, on first use, and shared by every request; each has
its own lock because espeak-ng and OpenJTalk keep state that is not safe to share between
threads (phonemizer loads a private copy of the espeak-ng library per backend, so two
languages do not block each other).
"""

from __future__ import annotations

import importlib.resources
import json
import logging
import re
import threading
from collections.abc import Callable
from functools import cached_property

from voicestream.catalog import DEFAULT_LANGUAGE, LANGUAGES
from voicestream.text.schedule import BREAK_WORDS

MAX_PHONEMES = 510
"""Kokoro's context: 512 tokens less the two padding tokens."""

_SENTENCE_CUT = re.compile(r"(?<=[.!?…])\s+")
_CLAUSE_CUT = re.compile(r"(?<=[,;:—])\s+")
_WORD_CUT = re.compile(r"\s+")

MAX_ESPEAK_CHARS = 500
"""Longer texts go to phonemizer in pieces of about this length: its punctuation handling
splits and rejoins the whole line once per mark, so one call costs the text's length times
its marks (seconds for "1,1,1,..." at 20 000 characters)."""
_ESPEAK_MARKS = re.escape(';:,.!?¡¿—…"«»“”(){}[]')
"""phonemizer's default punctuation marks: it phonemizes the text between them apart."""
_AFTER_MARK_AND_SPACE = re.compile(rf"(?<=[{_ESPEAK_MARKS}])\s+")
_AFTER_MARKS = re.compile(rf"(?<=[{_ESPEAK_MARKS}])(?=[^{_ESPEAK_MARKS}])")

ESPEAK_LANGUAGES = frozenset({"en-us", "en-gb", "es", "fr-fr", "hi", "it", "pt-br"})
MISAKI_LANGUAGES = frozenset({"ja", "zh"})

_ESPEAK_TO_KOKORO = sorted({
    "a^ɪ": "I", "a^ʊ": "W", "d^z": "ʣ", "d^ʒ": "ʤ", "e^ɪ": "A", "o^ʊ": "O", "ə^ʊ": "Q",
    "s^s": "S", "t^s": "ʦ", "t^ʃ": "ʧ", "ɔ^ɪ": "Y",
}.items())
"""Tied espeak-ng diphthongs and affricates as the single symbols of Kokoro's vocabulary,
the mapping Kokoro's pipeline applies to every non-English espeak-ng language."""


def load_vocab() -> dict[str, int]:
    text = importlib.resources.files("voicestream.engine").joinpath("vocab.json").read_text(encoding="utf-8")
    return json.loads(text)["vocab"]


def _espeak_backend(language: str, tie: bool):
    import espeakng_loader
    from phonemizer.backend import EspeakBackend
    from phonemizer.backend.espeak.wrapper import EspeakWrapper

    EspeakWrapper.set_library(espeakng_loader.get_library_path())
    EspeakWrapper.set_data_path(espeakng_loader.get_data_path())
    quiet = logging.getLogger("phonemizer")
    quiet.setLevel(logging.ERROR)  # punctuation makes it warn about word counts on every line
    return EspeakBackend(
        language, preserve_punctuation=True, with_stress=True,
        language_switch="remove-flags", logger=quiet, tie="^" if tie else False,
    )


class EspeakG2P:
    """espeak-ng for one language. English keeps espeak's own symbols (what the English
    voices were measured with); other languages get Kokoro's pipeline's mapping."""

    def __init__(self, language: str) -> None:
        self.language = language
        self._english = language.startswith("en-")
        self._lock = threading.Lock()

    @cached_property
    def _backend(self):
        return _espeak_backend(self.language, tie=not self._english)

    def __call__(self, text: str) -> str:
        return self.each([text])[0]

    def each(self, texts: list[str]) -> list[str]:
        """Phonemes of each text on its own: one espeak-ng call when every text is short."""
        if not self._english:  # as Kokoro's pipeline: parentheses become espeak's quote marks
            texts = [t.replace("«", "“").replace("»", "”").replace("(", "«").replace(")", "»") for t in texts]
        with self._lock:
            if all(len(text) <= MAX_ESPEAK_CHARS for text in texts):  # words said alone: one call
                raw = self._backend.phonemize(texts, strip=True)
            else:
                raw = [
                    "".join(self._backend.phonemize([piece], strip=True)[0] + joiner for piece, joiner in _espeak_pieces(text))
                    for text in texts
                ]
        return [self._kokoro_symbols(phonemes) for phonemes in raw]

    def _kokoro_symbols(self, raw: str) -> str:
        if self._english:
            return raw
        for tied, single in _ESPEAK_TO_KOKORO:
            raw = raw.replace(tied, single)
        return raw.replace("^", "").replace("-", "").replace("«", "(").replace("»", ")")


def _espeak_pieces(text: str, limit: int = MAX_ESPEAK_CHARS) -> list[tuple[str, str]]:
    """`text` cut for phonemizer where it cuts anyway, after a punctuation mark, each piece
    with what joins its phonemes to the next: a space where whitespace was (phonemizer
    keeps the mark's spaces, and the caller collapses them), nothing within a run of marks
    and words with no space ("1,1,1,", cut only when longer than `limit`)."""
    if len(text) <= limit:
        return [(text, "")]
    pieces: list[tuple[str, str]] = []
    for batch in _pack([atom for atom in _AFTER_MARK_AND_SPACE.split(text) if atom], limit):
        cuts = _pack(_AFTER_MARKS.split(batch), limit, joiner="") if len(batch) > limit else [batch]
        pieces += [(cut, "") for cut in cuts[:-1]] + [(cuts[-1], " ")]
    pieces[-1] = (pieces[-1][0], "")
    return pieces


class MisakiG2P:
    """misaki's Japanese or Chinese G2P, as Kokoro's pipeline builds it."""

    def __init__(self, language: str) -> None:
        self.language = language
        self._lock = threading.Lock()

    @cached_property
    def _g2p(self) -> Callable[[str], tuple[str, object]]:
        if self.language == "ja":
            from misaki import ja

            return ja.JAG2P()
        import jieba
        from misaki import zh

        jieba.setLogLevel(logging.WARNING)  # it logs its dictionary loading to stderr at DEBUG
        return zh.ZHG2P()

    def __call__(self, text: str) -> str:
        with self._lock:
            phonemes = self._g2p(text)[0]
        return phonemes[0] if isinstance(phonemes, tuple) else phonemes  # misaki 0.9 zh nests a tuple


class Phonemizer:
    """Text in any supported language to Kokoro token ids; one G2P per language, built once."""

    def __init__(self) -> None:
        self.vocab = load_vocab()
        self._lock = threading.Lock()
        self._g2p: dict[str, EspeakG2P | MisakiG2P] = {}

    def g2p(self, language: str) -> EspeakG2P | MisakiG2P:
        """The shared G2P of ``language`` (a code of ``LANGUAGES``)."""
        if language not in LANGUAGES:
            raise ValueError(f"no G2P for language {language!r}")
        with self._lock:
            if language not in self._g2p:
                kind = MisakiG2P if language in MISAKI_LANGUAGES else EspeakG2P
                self._g2p[language] = kind(language)
            return self._g2p[language]

    def phonemize(self, text: str, language: str = DEFAULT_LANGUAGE) -> str:
        """Phonemes of ``text``, restricted to the symbols Kokoro knows, whitespace collapsed."""
        raw = self.g2p(language)(text)
        known = "".join(p for p in raw if p in self.vocab)
        return " ".join(known.split())

    def phonemize_words(self, words: list[str], language: str = DEFAULT_LANGUAGE) -> list[str]:
        """Phonemes of each of ``words`` said alone (what word timestamps align against)."""
        g2p = self.g2p(language)
        raw = g2p.each(words) if isinstance(g2p, EspeakG2P) else [g2p(word) for word in words]
        return [" ".join("".join(p for p in phonemes if p in self.vocab).split()) for phonemes in raw]

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


FIRST_CLAUSE_MIN_PHONEMES = 30
"""A first sentence is cut at its first clause mark only where both sides keep at least
this many phonemes (about five words): shorter pieces cost more in prosody than they save."""


def split_first_clause(phonemes: str, min_len: int = FIRST_CLAUSE_MIN_PHONEMES) -> list[str]:
    """Cut a request's first batch at its first clause mark (comma, semicolon, colon, dash)
    that leaves `min_len` phonemes on each side and at most twice as many after it as
    before, so that its first audio comes after the clause's render rather than the whole
    sentence's (a clause ends where a speaker pauses anyway), and the rest, rendered at
    about twice real time on a CPU, is ready when the clause has played; unchanged when
    there is no such mark."""
    for match in _CLAUSE_CUT.finditer(phonemes):
        head, tail = phonemes[: match.start()].strip(), phonemes[match.end() :].strip()
        if len(tail) < min_len:
            break
        if len(head) >= min_len and len(tail) <= 2 * len(head):
            return [head, tail]
    return [phonemes]


FIRST_BREAK_MIN_WORDS = 5
"""A comma-less first sentence is cut before a break word only where both sides keep this many words."""


def split_before_break_word(sentence: str, min_words: int = FIRST_BREAK_MIN_WORDS) -> list[str]:
    """Cut an English sentence that has no usable clause mark before its first break word
    (latency mode's: "... start talking | before it has finished thinking.") that leaves
    `min_words` on each side and at most twice as many after it as before (the rest must
    render while the head plays); unchanged when there is none."""
    words = sentence.split()
    for index in range(min_words, len(words) - min_words + 1):
        if len(words) - index > 2 * index:
            continue
        if words[index].lower().strip("\"'(“‘") in BREAK_WORDS:
            return [" ".join(words[:index]), " ".join(words[index:])]
    return [sentence]


def _pack(atoms: list[str], limit: int, joiner: str = " ") -> list[str]:
    """Join neighbouring atoms greedily while they fit, so there are few, long batches."""
    batches: list[list[str]] = []
    length = 0
    for atom in atoms:
        if batches and length + len(joiner) + len(atom) <= limit:
            batches[-1].append(atom)
            length += len(joiner) + len(atom)
        else:
            batches.append([atom])
            length = len(atom)
    return [joiner.join(batch) for batch in batches]
