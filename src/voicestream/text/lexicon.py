"""Pronunciation lexicons: how listed words are said, whatever the G2P would make of them.

Two formats:

- **W3C PLS 1.0** (what ElevenLabs takes): ``<lexicon alphabet="ipa" xml:lang="en-US">``
  with ``<lexeme>`` entries, each one or more ``<grapheme>`` and a ``<phoneme>`` (IPA) or an
  ``<alias>`` (other words read in its place). The lexicon's ``xml:lang`` is its language: its
  entries apply to text read in that language only. Parsed with DTDs and entities refused.
- **a plain text file**, one ``word<TAB>IPA`` a line; ``#`` starts a comment; a
  ``# language: es`` line makes the entries after it apply to that language only (before
  any such line, to every language).

A word matches where it stands as a whole word (in Japanese and Chinese, anywhere), the
longest listed word first. It matches in any case ("Kokoro", "kokoro", "KOKORO"), unless its
grapheme has a capital letter after its first character ("US", "iPhone", "NaCl"): then only
as written. Applied to the text as written, before the normalizer and the G2P, for every
language: a listed word's phonemes are the model's input, every time. Where two entries list the same word,
the later wins (a later file of `serve --lexicon`, a later line).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from voicestream.catalog import UnsupportedLanguage, resolve_language
from voicestream.text.markup import MarkupError, Pronounced, Said, cut, kokoro_phonemes, safe_root
from voicestream.text.spans import UNSPACED_LANGUAGES, TracedText

MAX_ENTRIES = 10_000
"""Entries one lexicon may hold."""
MAX_GRAPHEME_CHARS = 100
_PLS_NS = "{http://www.w3.org/2005/01/pronunciation-lexicon}"
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
_LANGUAGE_HEADER = re.compile(r"#\s*language\s*:\s*(\S+)\s*$", re.IGNORECASE)


class LexiconError(ValueError):
    """A lexicon that cannot be read: the message says what and where."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Entry:
    """One listed word: its phonemes (IPA) or the words read in its place, for a language
    (None: every language)."""

    grapheme: str
    ipa: str | None = None
    alias: str | None = None
    language: str | None = None
    exact_case: bool | None = None
    """Whether only the grapheme's own case matches; None: the rule of the module docstring
    (a rule that says, as ElevenLabs' and Cartesia's do, wins)."""

    @property
    def case_sensitive(self) -> bool:
        if self.exact_case is not None:
            return self.exact_case
        return any(char.isupper() for char in self.grapheme[1:])


class Lexicon:
    """Entries by language, matched longest first (see the module docstring)."""

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self.entries: list[Entry] = list(entries)
        if len(self.entries) > MAX_ENTRIES:
            raise LexiconError(f"a lexicon holds at most {MAX_ENTRIES} entries; this one has {len(self.entries)}")
        self._patterns: dict[str, tuple[re.Pattern[str] | None, dict[str, Entry], dict[str, Entry]]] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def __add__(self, other: Lexicon) -> Lexicon:
        """Both lexicons' entries; ``other``'s win for a word both list."""
        return Lexicon([*self.entries, *other.entries])

    @classmethod
    def from_tsv(cls, text: str, source: str = "lexicon") -> Lexicon:
        entries = []
        language = None
        for number, line in enumerate(text.splitlines(), 1):
            stripped = line.strip()
            if header := _LANGUAGE_HEADER.match(stripped):
                language = _language(header[1], f"{source}, line {number}")
                continue
            if not stripped or stripped.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) < 2 or not fields[0].strip() or not fields[1].strip():
                raise LexiconError(f"{source}, line {number}: write a word, a tab and its IPA")
            entries.append(_entry(fields[0].strip(), fields[1].strip(), None, language, f"{source}, line {number}"))
        return cls(entries)

    @classmethod
    def from_pls(cls, text: str | bytes, source: str = "lexicon") -> Lexicon:
        try:
            root = safe_root(text.encode() if isinstance(text, str) else text, "lexicon")
        except MarkupError as error:
            raise LexiconError(f"{source}: {error.message}") from None
        if _local(root.tag) != "lexicon":
            raise LexiconError(f"{source}: the root element must be <lexicon>, not <{_local(root.tag)}>")
        alphabet = (root.get("alphabet") or "ipa").strip().lower()
        if alphabet != "ipa":
            raise LexiconError(f"{source}: alphabet {alphabet!r} is not read; write the phonemes in IPA (alphabet=\"ipa\")")
        lang = root.get(_XML_LANG) or root.get("xml:lang")
        language = _language(lang, source) if lang else None
        entries = []
        for number, lexeme in enumerate(root.iter(f"{_PLS_NS}lexeme" if root.tag.startswith("{") else "lexeme"), 1):
            graphemes = [(g.text or "").strip() for g in lexeme if _local(g.tag) == "grapheme"]
            said = next((child for child in lexeme if _local(child.tag) in ("phoneme", "alias")), None)
            where = f"{source}, lexeme {number}"
            if not any(graphemes) or said is None or not (said.text or "").strip():
                raise LexiconError(f"{where}: a lexeme needs a <grapheme> and a <phoneme> or an <alias>")
            value = (said.text or "").strip()
            for grapheme in filter(None, graphemes):
                ipa, alias = (value, None) if _local(said.tag) == "phoneme" else (None, value)
                entries.append(_entry(grapheme, ipa, alias, language, where))
        return cls(entries)

    @classmethod
    def from_text(cls, text: str, source: str = "lexicon") -> Lexicon:
        """A lexicon in either format: PLS when it starts with ``<``."""
        return cls.from_pls(text.encode(), source) if text.lstrip().startswith("<") else cls.from_tsv(text, source)

    def check(self, vocabulary: Collection[str]) -> None:
        """Raise `LexiconError` for an entry whose IPA has a symbol Kokoro does not know."""
        for entry in self.entries:
            if entry.ipa is not None:
                try:
                    kokoro_phonemes(entry.ipa, vocabulary)
                except MarkupError as error:
                    raise LexiconError(f"{entry.grapheme!r}: {error.message}") from None

    def apply(self, said: Said, vocabulary: Collection[str]) -> list[Said | Pronounced]:
        """``said`` with each listed word of its language cut out as its phonemes or alias."""
        pattern, exact, folded = self._compiled(said.voicing.language)
        if pattern is None:
            return [said]
        traced = said.text

        def found(match: re.Match[str]) -> Said | Pronounced | None:
            entry = exact.get(match[0]) or folded.get(match[0].casefold())
            if entry is None:
                return None
            span = traced.span(*match.span())
            if entry.ipa is not None:
                return Pronounced(kokoro_phonemes(entry.ipa, vocabulary), match[0], span, said.voicing)
            return Said(TracedText.literal(entry.alias or "", span), said.voicing)

        matches = ((m.start(), m.end(), found(m)) for m in pattern.finditer(traced.text))
        return cut(said, ((start, end, part) for start, end, part in matches if part is not None))

    def _compiled(self, language: str) -> tuple[re.Pattern[str] | None, dict[str, Entry], dict[str, Entry]]:
        if language not in self._patterns:
            exact: dict[str, Entry] = {}
            folded: dict[str, Entry] = {}
            for entry in (e for e in self.entries if e.language in (None, language)):  # a later entry wins
                if entry.case_sensitive:
                    exact[entry.grapheme] = entry
                else:
                    folded[entry.grapheme.casefold()] = entry
            graphemes = sorted({*exact, *(e.grapheme for e in folded.values())}, key=len, reverse=True)
            if not graphemes:
                self._patterns[language] = (None, exact, folded)
            else:
                alternatives = "|".join(
                    re.escape(g) if g in exact else f"(?i:{re.escape(g)})" for g in graphemes
                )
                if language in UNSPACED_LANGUAGES:
                    pattern = re.compile(f"(?:{alternatives})")
                else:
                    pattern = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)")
                self._patterns[language] = (pattern, exact, folded)
        return self._patterns[language]


def _local(tag: str) -> str:
    return tag.split("}")[-1]


def _language(code: str, where: str) -> str:
    try:
        return resolve_language(code)
    except UnsupportedLanguage as error:
        raise LexiconError(f"{where}: {error}") from None


def _entry(grapheme: str, ipa: str | None, alias: str | None, language: str | None, where: str) -> Entry:
    if len(grapheme) > MAX_GRAPHEME_CHARS:
        raise LexiconError(f"{where}: a word of more than {MAX_GRAPHEME_CHARS} characters")
    return Entry(grapheme, ipa, alias, language)
