"""Pronunciation markup in a text: SSML, bare SSML tags and misaki's inline phonemes.

A text is read as one of two kinds:

- an **SSML document**, when it starts (after whitespace) with ``<speak``, ``<?xml`` or
  ``<!DOCTYPE``: parsed with a hardened XML parser (defusedxml: a DTD, and so any entity,
  is refused before anything is expanded), its text read and its elements followed;
- **plain text**, where only the SSML elements that mean something for a single word or a
  pause are honoured when they appear bare (``break``, ``phoneme``, ``sub``, ``say-as``);
  every other tag is left to the normalizer, which drops it as before.

In both, misaki's ``[word](/phonemes/)`` gives a word its phonemes. `parse` returns None for
a text with none of it, so that such a text goes the way it always went.

The result is a sequence of items, in reading order: text to read with the language's G2P
(`Said`, traced into the text as sent, so that word times keep the writer's words and
offsets), a word with fixed phonemes (`Pronounced`), a pause (`Pause`) and a sentence or
paragraph end (`Boundary`); each spoken item carries how it is read (`Voicing`: language,
voice, speed). Wrong markup raises `MarkupError`, naming where (line and column), and is
never read aloud.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING
from xml.parsers import expat

from num2words import num2words

from voicestream.catalog import UnsupportedLanguage, resolve_language, voice_language
from voicestream.text.spans import Span, TracedText

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

MAX_BREAK_S = 10.0
"""The longest one ``<break>`` may be."""
MAX_BREAKS_S = 60.0
"""The most silence a text's breaks may add up to."""
MAX_TAG_CHARS = 512
"""The longest a tag, or a bare element with its content, may be: streamed text holds an
unfinished one back until it is complete, and one longer than this is refused."""
MAX_INLINE_CHARS = 256
"""The longest an inline ``[word](/phonemes/)`` may be; a longer bracket is plain text."""

BREAK_STRENGTHS = {"none": 0.0, "x-weak": 0.1, "weak": 0.25, "medium": 0.5, "strong": 0.75, "x-strong": 1.2}
"""Seconds of a ``<break strength>`` (``medium`` without attributes)."""
RATES = {"x-slow": 0.6, "slow": 0.8, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.5}
"""Speed multipliers of ``<prosody rate>``'s names (a percentage or a number also works)."""
KNOWN_ELEMENTS = frozenset({
    "speak", "break", "phoneme", "sub", "say-as", "prosody", "lang", "voice", "p", "s",
})
"""Elements whose meaning is followed; any other element's text is read, and logged once."""

DOCUMENT_OPENERS = ("<speak", "<?xml", "<!doctype")
"""What an SSML document opens with (any case); ``<speak`` only before `SPEAK_NAME_ENDS`."""
SPEAK_NAME_ENDS = " \t\r\n>/"
_DOCUMENT = re.compile(
    r"\s*(?:<speak[" + re.escape(SPEAK_NAME_ENDS) + "]|"
    + "|".join(re.escape(opener) for opener in DOCUMENT_OPENERS[1:]) + ")",
    re.IGNORECASE,
)
_TAG_START = re.compile(r"<[A-Za-z/!?]")
_DOCUMENT_END = re.compile(r"</speak\s*>$", re.IGNORECASE)
_BARE_TAG = re.compile(r"<(/?)(break|phoneme|sub|say-as)(?=[\s/>])([^<>]*)>", re.IGNORECASE)
_UNCLOSED_BARE_TAG = re.compile(r"<(break|phoneme|sub|say-as)(?=[\s/>]|$)[^<>]*$", re.IGNORECASE)
_ATTRIBUTE = re.compile(r"""([\w:.-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_INLINE = re.compile(r"\[([^\[\]\n]{1,128})\]\(/([^/\n()]{1,128})/\)")
_TIME = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*", re.IGNORECASE)
_PERCENT = re.compile(r"\s*([+-]?)(\d+(?:\.\d+)?)\s*%\s*")
_SENTENCE_END = re.compile(r"[.!?…。！？][\"'”’»)\]]*\s*$")
_IPA_EQUIVALENTS = {"g": "ɡ", "'": "ˈ", ":": "ː", "ɫ": "l", "ɝ": "ɜː", "͡": "", "‿": "", "\u200d": ""}
"""IPA spellings Kokoro's vocabulary writes another way (ASCII g, apostrophe stress, tie bars)."""


class MarkupError(ValueError):
    """Markup that cannot be read: its message names the problem and where it is."""

    def __init__(self, problem: str, text: str = "", offset: int | None = None) -> None:
        if offset is not None:
            line = text.count("\n", 0, offset) + 1
            column = offset - (text.rfind("\n", 0, offset) + 1) + 1
            problem = f"{problem} (line {line}, column {column})"
        super().__init__(problem)
        self.message = problem


@dataclass(frozen=True)
class Voicing:
    """How a span is read: its language (an engine code), its voice (None: the request's) and
    a multiplier of the request's speed."""

    language: str
    voice: str | None = None
    speed: float = 1.0


@dataclass(frozen=True)
class Said:
    """Text to read with the language's G2P, traced into the text as sent."""

    text: TracedText
    voicing: Voicing


@dataclass(frozen=True)
class Pronounced:
    """A written word said with the given phonemes (Kokoro's symbols)."""

    phonemes: str
    word: str
    span: Span
    voicing: Voicing


@dataclass(frozen=True)
class Pause:
    """Silence, in seconds, at this point."""

    seconds: float


@dataclass(frozen=True)
class Boundary:
    """A sentence (or paragraph) ends here."""

    paragraph: bool = False


Item = Said | Pronounced | Pause | Boundary


@dataclass(frozen=True)
class Markup:
    """A text's items in reading order, and the unknown elements whose text was read."""

    items: tuple[Item, ...]
    unknown: tuple[str, ...] = ()


def is_document(text: str) -> bool:
    """Whether ``text`` is read as an SSML (XML) document."""
    return _DOCUMENT.match(text) is not None


def has_markup(text: str) -> bool:
    """Whether `parse` would find anything in ``text`` (cheap: no parse)."""
    return is_document(text) or any(p.search(text) is not None for p in (_BARE_TAG, _INLINE, _UNCLOSED_BARE_TAG))


def parse(text: str, language: str, vocabulary: Collection[str]) -> Markup | None:
    """The markup of ``text`` read in ``language`` (an engine code), its phonemes checked
    against ``vocabulary``; None when it has none. Raises `MarkupError`."""
    if not has_markup(text):
        return None
    builder = _Builder(text, language, vocabulary)
    if is_document(text):
        _walk_document(text, builder)
    else:
        _walk_bare(text, builder)
    return builder.finish()


def split_inline(said: Said, vocabulary: Collection[str], source: str) -> list[Said | Pronounced]:
    """``said`` cut at each inline ``[word](/phonemes/)``."""

    def found(match: re.Match[str]) -> Pronounced:
        span = said.text.span(*match.span(1))
        return Pronounced(kokoro_phonemes(match[2], vocabulary, source, span[0]), match[1], span, said.voicing)

    return cut(said, ((m.start(), m.end(), found(m)) for m in _INLINE.finditer(said.text.text)))


def cut(said: Said, found: Iterable[tuple[int, int, Said | Pronounced]]) -> list[Said | Pronounced]:
    """``said`` with each run found in its text (start, end, what it becomes; in order) put in
    the run's place, the text around them kept."""
    parts: list[Said | Pronounced] = []
    traced, last = said.text, 0
    for start, end, part in found:
        if start > last:
            parts.append(Said(traced[last:start], said.voicing))
        parts.append(part)
        last = end
    if not parts:
        return [said]
    if last < len(traced):
        parts.append(Said(traced[last:], said.voicing))
    return parts


def kokoro_phonemes(ipa: str, vocabulary: Collection[str], source: str = "", offset: int | None = None) -> str:
    """IPA as Kokoro's symbols; raises `MarkupError` naming a symbol the model does not know."""
    phonemes = " ".join(ipa.strip().strip("/[]").split())
    phonemes = "".join(_IPA_EQUIVALENTS.get(symbol, symbol) for symbol in phonemes)
    for symbol in phonemes:
        if symbol != " " and symbol not in vocabulary:
            raise MarkupError(f"the phoneme {symbol!r} (U+{ord(symbol):04X}) is not one Kokoro knows", source, offset)
    if not phonemes.strip():
        raise MarkupError("empty phonemes", source, offset)
    return phonemes


def ends_sentence(text: str) -> bool:
    """Whether ``text`` ends with a sentence mark (closing quotes and brackets allowed after)."""
    return _SENTENCE_END.search(text) is not None


def unfinished_markup(text: str) -> int | None:
    """Where the markup that ``text`` leaves unfinished starts (streamed text may end inside a
    tag): an SSML document not yet closed, a tag without its ``>``, a bare element without its
    closing tag, an inline ``[word](/…`` without its ``/)``; None when there is none. Only the
    text's start (a document) and its last ``2 * MAX_TAG_CHARS`` characters are read, so that
    a stream asking this after each message pays for its tail, not its length (a bare element
    opened before them is left to `parse`, which refuses it unclosed).

    Raises `MarkupError` for a tag or bare element longer than `MAX_TAG_CHARS`. An unclosed
    bracket longer than `MAX_INLINE_CHARS` is plain text."""
    if is_document(text):
        closed = _DOCUMENT_END.search(text[-64:].rstrip()) is not None
        return None if closed else len(text) - len(text.lstrip())
    starts = []
    tag = text.rfind("<")
    if tag >= 0 and text.find(">", tag) < 0 and (tag == len(text) - 1 or _TAG_START.match(text, tag)):
        if len(text) - tag > MAX_TAG_CHARS:
            raise MarkupError(f"a tag longer than {MAX_TAG_CHARS} characters is not closed", text, tag)
        starts.append(tag)
    opened = None
    window = max(0, len(text) - 2 * MAX_TAG_CHARS)  # one opened before it would be too long already
    for match in _BARE_TAG.finditer(text, window):
        if match[2].lower() != "break" and not match[3].rstrip().endswith("/"):
            opened = None if match[1] else match.start()
    if opened is not None:
        if len(text) - opened > MAX_TAG_CHARS:
            raise MarkupError(f"<{text[opened + 1:].split()[0].rstrip('>')}> is not closed within {MAX_TAG_CHARS} characters", text, opened)
        starts.append(opened)
    bracket = text.rfind("[")
    if bracket >= 0 and len(text) - bracket <= MAX_INLINE_CHARS and "\n" not in text[bracket:]:
        rest = text[bracket:]
        if re.fullmatch(r"\[[^\[\]]*(?:\](?:\((?:/[^/()]*/?)?)?)?", rest):
            starts.append(bracket)
    return min(starts) if starts else None


def document_ends_at(text: str, end: int) -> bool:
    """Whether ``text`` is an SSML document whose ``</speak>`` ends at ``end`` (reads only the
    text's start and the characters just before ``end``)."""
    return is_document(text) and _DOCUMENT_END.search(text, max(0, end - 64), end) is not None


def ends_inside_markup(text: str) -> bool:
    """Whether ``text`` ends inside markup still coming (`unfinished_markup`); markup open for
    longer than its bound counts as plain text here (the server's stream refuses it)."""
    try:
        return unfinished_markup(text) is not None
    except MarkupError:
        return False


# --- building the items ------------------------------------------------------------------


@dataclass
class _Open:
    """An element being read: its name, where it started, and its text so far."""

    name: str
    offset: int
    attributes: dict[str, str]
    content: list[TracedText] = field(default_factory=list)
    voicing: Voicing | None = None


class _Builder:
    """The items of one text, as its walker finds its text and elements."""

    def __init__(self, source: str, language: str, vocabulary: Collection[str]) -> None:
        self.source = source
        self.vocabulary = vocabulary
        self.items: list[Item] = []
        self.voicings = [Voicing(language)]
        self.capturing: _Open | None = None
        """The open ``phoneme``, ``sub`` or ``say-as``: its text is its own, not read as text."""
        self.unknown: list[str] = []
        self.breaks_s = 0.0

    @property
    def voicing(self) -> Voicing:
        return self.voicings[-1]

    def text(self, traced: TracedText) -> None:
        if self.capturing is not None:
            self.capturing.content.append(traced)
        elif traced.text:
            self.items.append(Said(traced, self.voicing))

    def start(self, name: str, attributes: dict[str, str], offset: int) -> None:
        name = name.lower()
        if self.capturing is not None:  # an element inside a phoneme, sub or say-as: its text is the word's
            return
        voicing = self._voicing(name, attributes, offset)
        if name in ("phoneme", "sub", "say-as"):
            self.capturing = _Open(name, offset, attributes, voicing=voicing)
            return
        if name == "break":
            self.pause(attributes, offset)
            return
        if name in ("p", "s"):
            self.items.append(Boundary(paragraph=name == "p"))
        elif name not in KNOWN_ELEMENTS and name not in self.unknown:
            self.unknown.append(name)
        self.voicings.append(voicing)

    def end(self, name: str, offset: int) -> None:
        name = name.lower()
        opened = self.capturing
        if opened is not None:
            if name != opened.name:
                return
            self.capturing = None
            content = TracedText.join(opened.content)
            voicing = opened.voicing or self.voicing
            if opened.name == "phoneme":
                self._phoneme(opened, content, voicing)
            elif opened.name == "sub":
                self._sub(opened, content, voicing)
            else:
                self._say_as(opened, content, voicing)
            return
        if name == "break":
            return
        if len(self.voicings) > 1:
            self.voicings.pop()
        if name in ("p", "s"):
            self.items.append(Boundary(paragraph=name == "p"))

    def pause(self, attributes: dict[str, str], offset: int) -> None:
        time = attributes.get("time")
        if time is not None:
            match = _TIME.fullmatch(time)
            if match is None:
                raise MarkupError(f"<break time={time!r}>: write a time such as \"700ms\" or \"1.5s\"", self.source, offset)
            seconds = float(match[1]) / (1000 if match[2].lower() == "ms" else 1)
        else:
            strength = attributes.get("strength", "medium").strip().lower()
            if strength not in BREAK_STRENGTHS:
                raise MarkupError(f"<break strength={strength!r}>: use one of {', '.join(BREAK_STRENGTHS)}", self.source, offset)
            seconds = BREAK_STRENGTHS[strength]
        if seconds > MAX_BREAK_S:
            raise MarkupError(f"a break of {seconds:g} s is longer than the {MAX_BREAK_S:g} s allowed", self.source, offset)
        self.breaks_s += seconds
        if self.breaks_s > MAX_BREAKS_S:
            raise MarkupError(f"the breaks add up to more than the {MAX_BREAKS_S:g} s allowed", self.source, offset)
        if seconds > 0:
            self.items.append(Pause(seconds))

    def finish(self) -> Markup:
        if self.capturing is not None:
            raise MarkupError(f"<{self.capturing.name}> is not closed", self.source, self.capturing.offset)
        items: list[Item] = []
        for item in self.items:
            parts = split_inline(item, self.vocabulary, self.source) if isinstance(item, Said) else [item]
            for part in parts:
                if isinstance(part, Said) and items and isinstance(items[-1], Said) and items[-1].voicing == part.voicing:
                    items[-1] = Said(TracedText.join([items[-1].text, part.text]), part.voicing)
                else:
                    items.append(part)
        return Markup(tuple(items), tuple(self.unknown))

    def _voicing(self, name: str, attributes: dict[str, str], offset: int) -> Voicing:
        voicing = self.voicing
        if name == "voice":
            voice = (attributes.get("name") or "").strip()
            if voice:
                voicing = replace(voicing, voice=voice, language=self._language_of_voice(voice, offset))
        language = attributes.get("xml:lang") or (attributes.get("lang") if name == "lang" else None)
        if language:
            try:
                voicing = replace(voicing, language=resolve_language(language))
            except UnsupportedLanguage as error:
                raise MarkupError(f"<{name} xml:lang>: {error}", self.source, offset) from None
        if name == "prosody" and attributes.get("rate"):
            voicing = replace(voicing, speed=voicing.speed * self._rate(attributes["rate"], offset))
        return voicing

    def _language_of_voice(self, voice: str, offset: int) -> str:
        try:
            return voice_language(voice)
        except (ValueError, KeyError):
            raise MarkupError(f"<voice name={voice!r}> names no voice", self.source, offset) from None

    def _rate(self, rate: str, offset: int) -> float:
        key = rate.strip().lower()
        if key in RATES:
            return RATES[key]
        if match := _PERCENT.fullmatch(key):
            value = float(match[2]) / 100
            multiplier = 1 + value if match[1] == "+" else 1 - value if match[1] == "-" else value
        else:
            try:
                multiplier = float(key)
            except ValueError:
                multiplier = 0.0
        if not 0 < multiplier <= 10:
            raise MarkupError(f"<prosody rate={rate!r}>: use {', '.join(RATES)}, a percentage or a multiplier", self.source, offset)
        return multiplier

    def _phoneme(self, opened: _Open, content: TracedText, voicing: Voicing) -> None:
        alphabet = opened.attributes.get("alphabet", "ipa").strip().lower()
        if alphabet != "ipa":
            raise MarkupError(f"<phoneme alphabet={alphabet!r}>: only \"ipa\" is read", self.source, opened.offset)
        ph = opened.attributes.get("ph")
        if ph is None:
            raise MarkupError("<phoneme> needs a ph attribute", self.source, opened.offset)
        phonemes = kokoro_phonemes(ph, self.vocabulary, self.source, opened.offset)
        word = content.text.strip()
        span = _content_span(content, opened.offset)
        self.items.append(Pronounced(phonemes, word or ph, span, voicing))

    def _sub(self, opened: _Open, content: TracedText, voicing: Voicing) -> None:
        alias = opened.attributes.get("alias")
        if alias is None:
            raise MarkupError("<sub> needs an alias attribute", self.source, opened.offset)
        self.items.append(Said(TracedText.literal(alias, _content_span(content, opened.offset)), voicing))

    def _say_as(self, opened: _Open, content: TracedText, voicing: Voicing) -> None:
        kind = (opened.attributes.get("interpret-as") or "").strip().lower()
        if kind not in SAY_AS:
            raise MarkupError(f"<say-as interpret-as={kind!r}>: use one of {', '.join(SAY_AS)}", self.source, opened.offset)
        written = content.text.strip()
        spoken = SAY_AS[kind](written, voicing.language, (opened.attributes.get("format") or "").strip().lower())
        self.items.append(Said(TracedText.literal(spoken, _content_span(content, opened.offset)), voicing))


def _content_span(content: TracedText, offset: int) -> Span:
    """Where an element's text is in the text as sent (less its surrounding spaces)."""
    text = content.text
    start = len(text) - len(text.lstrip())
    end = len(text.rstrip())
    return content.span(start, end) if start < end else (offset, offset)


# --- say-as ------------------------------------------------------------------------------

_LETTER_NAMES = {"en": {"a": "eh"}}
"""Letters a G2P reads as a word when alone ("a", the article): their names."""
_NUM2WORDS = {"en-us": "en", "en-gb": "en", "es": "es", "fr-fr": "fr", "it": "it", "pt-br": "pt_BR", "hi": "hi", "ja": "ja"}
_MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August",
                "September", "October", "November", "December")
_CURRENCY_CODES = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}


def _spelled(written: str, language: str, _format: str = "") -> str:
    names = _LETTER_NAMES.get(language[:2], {})
    return " ".join(names.get(char.lower(), char) for char in written if char.isalnum())


def _digits(written: str, language: str, _format: str = "") -> str:
    return ", ".join(" ".join(group) for group in re.findall(r"\d+", written)) or written


def _number(written: str, language: str, to: str) -> str:
    digits = re.sub(r"[^\d-]", "", written)
    code = _NUM2WORDS.get(language)
    if not re.fullmatch(r"-?\d{1,15}", digits) or code is None:
        return written
    try:
        return _spoken(int(digits), code, to)
    except (NotImplementedError, OverflowError, ValueError):
        return written


@functools.lru_cache(maxsize=1024)
def _spoken(number: int, code: str, to: str) -> str:
    return num2words(number, lang=code, to=to)


def _cardinal(written: str, language: str, _format: str = "") -> str:
    return _number(written, language, "cardinal")


def _ordinal(written: str, language: str, _format: str = "") -> str:
    return _number(written, language, "ordinal")


def _date(written: str, language: str, format_: str = "") -> str:
    """An English date ("2024-03-05", or as ``format`` orders it: mdy, dmy, ymd, md, dm, ym,
    my); other languages' dates, and dates that do not parse, are read as written."""
    fields = re.findall(r"\d+", written)
    order = format_ or ("ymd" if re.fullmatch(r"\s*\d{4}-\d{1,2}-\d{1,2}\s*", written) else "mdy")
    if not language.startswith("en") or len(fields) != len(order) or set(order) - set("dmy"):
        return written
    parts = dict(zip(order, (int(f) for f in fields), strict=True))
    if not 1 <= parts.get("m", 1) <= 12 or not 1 <= parts.get("d", 1) <= 31:
        return written
    spoken = []
    if "m" in parts:
        spoken.append(_MONTH_NAMES[parts["m"] - 1])
    if "d" in parts:
        spoken.append(_spoken(parts["d"], "en", "ordinal"))
    if "y" in parts:
        if len(spoken) == 2:
            spoken[-1] += ","
        spoken.append(_spoken(parts["y"], "en", "year"))
    return " ".join(spoken)


def _telephone(written: str, language: str, _format: str = "") -> str:
    plus = "plus " if written.strip().startswith("+") and language.startswith("en") else ""
    return plus + _digits(written, language)


def _currency(written: str, language: str, _format: str = "") -> str:
    """An amount with a currency code ("29.95 USD", "USD 29.95") as the normalizer reads its symbol."""
    match = re.fullmatch(r"\s*(?:([A-Z]{3})\s*([\d.,]+)|([\d.,]+)\s*([A-Z]{3}))\s*", written)
    if match is None or not language.startswith("en"):
        return written
    code, amount = (match[1], match[2]) if match[1] else (match[4], match[3])
    symbol = _CURRENCY_CODES.get(code)
    return f"{symbol}{amount}" if symbol else written


def _as_written(written: str, language: str, _format: str = "") -> str:
    return written


SAY_AS: dict[str, Callable[[str, str, str], str]] = {
    "characters": _spelled, "spell-out": _spelled, "verbatim": _spelled, "digits": _digits,
    "cardinal": _cardinal, "number": _cardinal, "ordinal": _ordinal, "date": _date,
    "time": _as_written, "telephone": _telephone, "currency": _currency,
}
"""``<say-as interpret-as>`` kinds: the written text to what is read (with the language's G2P
and normalizer after)."""


# --- the two walkers ---------------------------------------------------------------------


def _walk_bare(text: str, builder: _Builder) -> None:
    """Plain text with bare ``break``, ``phoneme``, ``sub`` and ``say-as`` tags."""
    traced = TracedText(text)
    last = 0
    for match in _BARE_TAG.finditer(text):
        builder.text(traced[last : match.start()])
        closing, name, rest = match[1], match[2].lower(), match[3]
        if closing and name == "break":
            pass
        elif closing:
            if builder.capturing is None or builder.capturing.name != name:
                raise MarkupError(f"</{name}> closes no <{name}>", text, match.start())
            builder.end(name, match.start())
        else:
            if builder.capturing is not None:
                raise MarkupError(f"<{name}> inside <{builder.capturing.name}>", text, match.start())
            attributes = {m[1].lower(): html.unescape(m[2] if m[2] is not None else m[3]) for m in _ATTRIBUTE.finditer(rest)}
            builder.start(name, attributes, match.start())
            if rest.rstrip().endswith("/") and name != "break":
                builder.end(name, match.start())
        last = match.end()
    if (unclosed := _UNCLOSED_BARE_TAG.search(text, last)) is not None:
        raise MarkupError(f"<{unclosed[1]}> has no closing '>'", text, unclosed.start())
    builder.text(traced[last:])


def _walk_document(text: str, builder: _Builder) -> None:
    """An SSML document: checked by defusedxml first (no DTD, so no entity is ever expanded),
    then walked with expat for the offsets of its text in ``text``."""
    lead = len(text) - len(text.lstrip())
    body = text[lead:].encode()
    root = safe_root(body, "SSML")
    if root.tag.split("}")[-1] != "speak":
        raise MarkupError(f"an SSML document's root must be <speak>, not <{root.tag}>")
    char_at = [lead + at for at in _char_offsets(text[lead:], body)]
    parser = expat.ParserCreate()
    parser.buffer_text = False

    def offset() -> int:
        return char_at[parser.CurrentByteIndex]

    def on_text(data: str) -> None:
        start = offset()
        if text.startswith(data, start):
            builder.text(TracedText(data, list(range(start, start + len(data))), list(range(start + 1, start + len(data) + 1))))
        else:  # a character reference or a line break expat rewrote
            end = text.find(";", start) + 1 if text.startswith("&", start) else start + 1
            builder.text(TracedText.literal(data, (start, max(end, start + 1))))

    parser.StartElementHandler = lambda name, attributes: builder.start(name.split(":")[-1], attributes, offset())
    parser.EndElementHandler = lambda name: builder.end(name.split(":")[-1], offset())
    parser.CharacterDataHandler = on_text
    try:
        parser.Parse(body, True)
    except expat.ExpatError as error:  # not reached after defusedxml's parse; kept as the last word
        raise MarkupError(f"malformed SSML: {expat.ErrorString(error.code)}", text, None) from None


def safe_root(document: bytes, kind: str) -> Element:
    """The root of an XML document parsed by defusedxml: a DTD (and with it any entity, the
    billion laughs, an external file) is refused as soon as the parser meets it, before
    anything is expanded. Raises `MarkupError`."""
    import defusedxml
    import defusedxml.ElementTree as safe_xml

    try:
        return safe_xml.fromstring(document, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except defusedxml.DefusedXmlException as error:
        raise MarkupError(f"{kind} with a DTD or entities is refused ({type(error).__name__})") from None
    except safe_xml.ParseError as error:
        line, column = error.position
        raise MarkupError(f"malformed {kind}: {expat.ErrorString(error.code)} (line {line}, column {column + 1})") from None


def _char_offsets(text: str, encoded: bytes) -> list[int]:
    """For each byte of ``text``'s UTF-8 (and one past the end), the character it belongs to."""
    if len(encoded) == len(text):
        return list(range(len(text) + 1))
    offsets: list[int] = []
    for index, char in enumerate(text):
        offsets += [index] * len(char.encode())
    offsets.append(len(text))
    return offsets
