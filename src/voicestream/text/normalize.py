"""Rewrite text into what should be read aloud, before speech synthesis.

LLM answers carry markdown, HTML, emoji and written forms ("$29.95", "Dr.", "10:30 a.m.")
that a phonemizer such as espeak-ng reads badly or literally ("asterisk asterisk").
`normalize_for_speech` removes markup and rewrites those forms into words, keeping the
sentence punctuation that gives speech its pauses and intonation.

Choices:
- fenced code blocks are dropped with their content (code read aloud is noise); an
  unclosed fence marker alone is dropped, so a chunk cut inside a block loses only the
  marker; inline code keeps its text without the backticks;
- link text is kept and its URL dropped; images are dropped with their alt text;
- URLs and e-mail addresses written out in the text are left as they are, and no
  rewriting of symbols or numbers happens inside them;
- line breaks are kept (one per line of text), other whitespace runs become one space.

Every pattern runs in time linear in the text (a request may hold 20 000 characters, and
the work holds the GIL): where a pattern tried at each start of a long run would rescan
the run, it is written so that a start that must fail fails at once (a possessive
quantifier, a lookbehind at the run's start) or the failed stretch is matched whole and
kept as it is (`_keep_unless`, `_strong_markers`, `_urls_and_emails`).

Normalizing the result again changes nothing, short of contrived mixes of markup and
symbols ("##&amp;" gives "## and", then "and").
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Callable, Iterator

from voicestream.text.abbreviations import MONTHS, TITLES
from voicestream.text.spans import TracedText
from voicestream.text.spoken_forms import speak_in_language

_CHARACTER_REFERENCE = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)")
"""What `html.unescape` replaces (its own pattern), so that each reference is traced."""

_CODE_FENCE_BLOCK = re.compile(
    r"^[ \t]*(```|~~~)[^\n]*\n.*?^[ \t]*\1[^\n]*$", re.MULTILINE | re.DOTALL
)
_CODE_FENCE_MARKER = re.compile(r"^[ \t]*(?:```|~~~)[^\n]*$", re.MULTILINE)
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.DOTALL)
_AUTOLINK = re.compile(r"<((?:https?://|mailto:)[^\s<>]+)>")
_HTML_BLOCK_TAG = re.compile(
    r"</?(?:br|p|div|li|ul|ol|h[1-6]|tr|table|blockquote|section|article|hr)\b[^<>]*>",
    re.IGNORECASE,
)
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
# The link patterns match a failed candidate too, up to where every later candidate in it
# would fail the same way (the same closing bracket or line end), and keep it unchanged:
# their group "end" is set only for a whole link.
_IMAGE = re.compile(r"!\[[^\]\n]*+(?:\]\([^)\n]*+(?P<end>\))?)?")
_LINK = re.compile(r"\[([^\]\n]*+)(?:\]\([^)\n]*+(?P<end>\))?)?")
_REFERENCE_LINK = re.compile(r"\[([^\]\n]++)(?:\]\[[^\]\n]*+(?P<end>\])?)?")
_LINE_MARKERS = re.compile(
    r"^(?:[ \t]*+(?:#{1,6}[ \t]++|>[ \t]?+|[-*+•◦▪‣⁃][ \t]++))++", re.MULTILINE
)
"""Heading marks, quote marks and bullets that open a line, in any mix ("> - ## x"): all
removed at once, since one removal per pass of `_strip_markup` would make a line of
thousands of them take thousands of passes."""
_HORIZONTAL_RULE = re.compile(r"^[ \t]*([-*_])(?:[ \t]*\1){2,}[ \t]*$", re.MULTILINE)
_TABLE_RULE = re.compile(
    r"^[ \t]*+\|?[ \t]*+:?-{3,}:?[ \t]*+(?:\|[ \t]*+:?-{3,}:?[ \t]*+)*+\|?[ \t]*+$", re.MULTILINE
)
_TABLE_ROW = re.compile(r"^[ \t]*+\|(.*)", re.MULTILINE)
"""A row's cells: a closing "|" and trailing spaces make only empty cells, which are dropped."""
_TABLE_CELL = re.compile(r"[^|\s](?:[^|]*[^|\s])?")
"""A cell of a row, less the spaces around it (`_speak_table_row` strips them)."""
_INLINE_CODE = re.compile(r"`+([^`\n]*)`+")
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_STRONG_OPENER = re.compile(r"(\*\*|__)(?=\S)")
_EMPHASIS = re.compile(r"(?<![\w*])([*_])(?=\S)([^*_\n]+?)(?<=\S)\1(?![\w*])")
_STRIKETHROUGH = re.compile(r"~~(.+?)~~")
_STRAY_MARKUP = re.compile(r"\*{2,}|(?<!\w)_{2,}|_{2,}(?!\w)|`+|~~")

_EMOJI = re.compile(
    "["
    "\U0001f000-\U0001faff"  # pictographs, emoticons, transport, flags, symbols
    "\u2600-\u27bf"  # miscellaneous symbols and dingbats
    "\u2b00-\u2bff"  # arrows and stars used as emoji
    "\u2300-\u23ff"  # technical symbols used as emoji (watch, hourglass)
    "\ufe00-\ufe0f"  # variation selectors
    "\u200d"  # zero-width joiner
    "\u20e3"  # combining keycap
    "\U000e0020-\U000e007f"  # tag characters (subdivision flags)
    "]+"
)

_URL_OR_EMAIL = re.compile(
    r"(?:https?://|www\.)[^\s<>]*[^\s<>.,;:!?)\]'\"]|[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
)
_URL_OR_EMAIL_AT_RUN_START = re.compile(
    r"(?:https?://|www\.)[^\s<>]*[^\s<>.,;:!?)\]'\"]|(?<![\w.+-])[\w.+-]++@[\w-]+(?:\.[\w-]+)+"
)
"""`_URL_OR_EMAIL` with an address only at the start of a run of the characters before
its "@": one found later in the run would also be found at the run's start."""

_THOUSANDS_SEPARATOR = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_CURRENCY_SYMBOLS: dict[str, tuple[str, str, str, str]] = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "¥": ("yen", "yen", "", ""),
}
_SCALES = "thousand|million|billion|trillion"
_MONEY = re.compile(
    r"(?<![$€£¥])[$€£¥]*([$€£¥])[ \t]?(\d+)(?:\.(\d+))?(?![\d.]\d)(?:[ \t]?(" + _SCALES + r"|[kKmMbB]n?)\b)?"
)
_SCALE_LETTERS = {"k": "thousand", "m": "million", "mn": "million", "b": "billion", "bn": "billion"}
_PERCENT = re.compile(r"(\d)[ \t]?%")
_TIME = re.compile(
    r"\b(\d{1,2}):(\d{2})(?!\d)(?::\d{2})?(?:[ \t]?([AaPp])\.?[Mm]\.?(?![\w]))?|"
    r"\b(\d{1,2})[ \t]?([AaPp])(?:\.[Mm]\.|[Mm]\b)"
)
_DECIMAL = re.compile(r"(?<![\w.])(\d+)\.(\d+)(?![\w]|\.\d)")
_DEGREES = re.compile(r"(\d)[ \t]?°[ \t]?([CF])?(?![A-Za-z])")
_NUMBER_RANGE = re.compile(r"(\d)[ \t]?–[ \t]?(\d)")
_AMPERSAND = re.compile(r"[ \t]*&[ \t]*")

_TITLE = re.compile(r"\b(" + "|".join(sorted(TITLES, key=len, reverse=True)) + r")\.(?=[ \t])")
_SAINT_OR_STREET = re.compile(r"\bSt\.")
_NAME_FOLLOWS = re.compile(r"[ \t]+[A-Z]")
_MONTH = re.compile(r"\b(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.(?=[ \t]*\d)")
_NUMBER_WORDS = re.compile(r"\b(No|no|Nos|nos|Fig|fig|pp|p)\.[ \t]?(?=\d)")
_NUMBER_WORD_FORMS = {"no": "number", "nos": "numbers", "fig": "figure", "pp": "pages", "p": "page"}
_LATIN = re.compile(r"(?<![\w.])(e\.g|i\.e|etc|vs|approx|cf)\.(?=[\s,;:)]|$)", re.IGNORECASE)
_LATIN_FORMS = {
    "e.g": "for example",
    "i.e": "that is",
    "etc": "et cetera",
    "vs": "versus",
    "approx": "approximately",
    "cf": "compare",
}
_POSTFIX = re.compile(r"\b(Jr|Sr|Inc|Ltd|Co|Corp)\.(?=[\s,;:)]|$)")
_POSTFIX_FORMS = {
    "Jr": "Junior",
    "Sr": "Senior",
    "Inc": "Incorporated",
    "Ltd": "Limited",
    "Co": "Company",
    "Corp": "Corporation",
}
_SENTENCE_CONTINUES = re.compile(r"[ \t]*[a-z0-9,;:)]")
"""What follows an abbreviation's period when that period does not end the sentence."""
_ONLY_SPACE_LEFT = re.compile(r"\s*+\Z")
_UNTIDY = re.compile(r"\s{2,}|[^\S ]|^ | $")
"""Whitespace that `_tidy_whitespace` changes (or may: a single newline stays one)."""
_LINE_BOUNDARY = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
"""Where `str.splitlines` cuts lines."""


def normalize_for_speech(text: str, language: str = "en-us") -> str:
    """Return `text` as it should be spoken: markup, emoji and HTML removed, numbers,
    currency, times and common abbreviations written as words.

    The rules for symbols and numbers are English ones and apply to English (``en-*``)
    only; other languages get theirs from :func:`speak_in_language`."""
    return normalize_traced(text, language).text


def normalize_traced(text: str | TracedText, language: str = "en-us") -> TracedText:
    """`normalize_for_speech`, each character of the result knowing the span of ``text`` it
    stands for (`TracedText`): what word timestamps show the words as written with. A
    `TracedText` (a span of SSML's text) keeps its own trace into the text as sent."""
    # removing markup can expose more: "🎉 - item", "**# x**"
    source = text if isinstance(text, TracedText) else TracedText(text)
    unescaped = source.sub(_CHARACTER_REFERENCE, functools.partial(_unescape, source))
    traced = _until_stable(_strip_markup, unescaped.sub(_EMOJI, ""))
    if language.startswith("en"):
        rewrite = _speak_symbols
    else:
        rewrite = functools.partial(speak_in_language, language=language)
    traced = _rewrite_outside_urls(_tidy_whitespace(traced), rewrite)
    return _tidy_whitespace(traced)


def _unescape(source: TracedText, match: re.Match[str]) -> TracedText:
    """A character reference ("&amp;") as the character it stands for, traced to all of it."""
    return TracedText.literal(html.unescape(match.group()), source.span(*match.span()))


def _strip_markup(text: TracedText) -> TracedText:
    text = text.sub(_CODE_FENCE_BLOCK, "")
    text = text.sub(_CODE_FENCE_MARKER, "")
    text = text.sub(_HTML_COMMENT, "")
    text = text.sub(_AUTOLINK, r"\1")
    text = text.sub(_HTML_BLOCK_TAG, "\n")
    text = text.sub(_HTML_TAG, "")
    text = text.sub(_IMAGE, _keep_unless(""))
    text = text.sub(_LINK, _keep_unless(r"\1"))
    text = text.sub(_REFERENCE_LINK, _keep_unless(r"\1"))
    text = text.sub(_HORIZONTAL_RULE, "")
    text = text.sub(_LINE_MARKERS, "")
    text = text.sub(_TABLE_RULE, "")
    text = text.sub(_TABLE_ROW, functools.partial(_speak_table_row, text))
    return _rewrite_outside_urls(text, _strip_inline_markup)


def _strip_inline_markup(text: TracedText) -> TracedText:
    text = text.sub(_INLINE_CODE, r"\1")
    text = _until_stable(_strip_emphasis, text)  # nested: ***both*** or **a _b_ c**
    return text.sub(_STRAY_MARKUP, "")


def _strip_emphasis(text: TracedText) -> TracedText:
    text = _strong_markers(text)
    text = text.sub(_EMPHASIS, r"\2")
    return text.sub(_STRIKETHROUGH, r"\1")


MAX_PASSES = 8
"""Passes of a markup rule over the text at most. Real markup settles in two or three;
contrived nesting ("[[[[a](x)](x)](x)](x)" a thousand deep) would take a pass per level, each
over the whole text, and is left with its innermost marks instead."""


def _until_stable(strip: Callable[[TracedText], TracedText], text: TracedText) -> TracedText:
    for _ in range(MAX_PASSES):
        stripped = strip(text)
        if stripped.text == text.text:
            break
        text = stripped
    return text


def _keep_unless(template: str) -> Callable[[re.Match[str]], str]:
    """A replacement for the link patterns: `template` for a whole link, the text as it
    was for a failed candidate."""
    return lambda match: match.expand(template) if match["end"] else match.group()


def _strong_markers(traced: TracedText) -> TracedText:
    """`_STRONG.sub(r"\2", text)` without rescanning a line for each marker that cannot
    close: once a "**" (or "__") finds no closing one on its line, no later one on that
    line can find one either."""
    text = traced.text
    parts: list[TracedText] = []
    last = 0
    hopeless_until = {"**": -1, "__": -1}
    position = 0
    while opener := _STRONG_OPENER.search(text, position):
        start = opener.start()
        position = start + 1
        if start < hopeless_until[opener[1]]:
            continue
        if match := _STRONG.match(text, start):
            parts += (traced[last:start], traced[match.start(2) : match.end(2)])
            last = position = match.end()
        else:
            line_end = text.find("\n", start)
            hopeless_until[opener[1]] = len(text) if line_end < 0 else line_end
    if not parts:
        return traced
    parts.append(traced[last:])
    return TracedText.join(parts)


def _speak_table_row(traced: TracedText, match: re.Match[str]) -> TracedText:
    """A row's cells joined by commas, each cell traced to its own text."""
    cells: list[TracedText] = []
    for cell in _TABLE_CELL.finditer(match.string, match.start(1), match.end(1)):
        if cells:
            cells.append(TracedText.literal(", ", traced.span(cell.start(), cell.start())))
        cells.append(traced[cell.start() : cell.end()])
    return TracedText.join(cells)


def _rewrite_outside_urls(text: TracedText, rewrite: Callable[[TracedText], TracedText]) -> TracedText:
    """Apply `rewrite` to the text between URLs and e-mail addresses only."""
    return text.map_text(rewrite, [match.span() for match in _urls_and_emails(text.text)])


def _urls_and_emails(text: str) -> Iterator[re.Match[str]]:
    """`_URL_OR_EMAIL.finditer(text)`, in linear time: an address can also start where
    the previous match ended, inside a run ("a@b.c+d@e.f"), so that position is tried
    with the plain pattern, every later one with `_URL_OR_EMAIL_AT_RUN_START`."""
    position = 0
    while position <= len(text):
        match = _URL_OR_EMAIL.match(text, position) or _URL_OR_EMAIL_AT_RUN_START.search(text, position + 1)
        if match is None:
            return
        yield match
        position = match.end()


def _speak_symbols(text: TracedText) -> TracedText:
    text = text.sub(_AMPERSAND, " and ")
    text = text.sub(_MONTH, lambda m: MONTHS[m.group(1)])
    text = text.sub(_SAINT_OR_STREET, _speak_saint_or_street)
    text = text.sub(_TITLE, lambda m: TITLES[m.group(1)])
    text = text.sub(_NUMBER_WORDS, _speak_number_word)
    text = text.sub(_LATIN, _speak_latin)
    text = text.sub(_POSTFIX, lambda m: _POSTFIX_FORMS[m.group(1)] + _kept_period(m.string, m.end()))
    text = text.sub(_THOUSANDS_SEPARATOR, "")
    text = text.sub(_MONEY, _speak_money)
    text = text.sub(_PERCENT, r"\1 percent")
    text = text.sub(_TIME, _speak_time)
    text = text.sub(_DEGREES, _speak_degrees)
    text = text.sub(_DECIMAL, _speak_decimal)
    return text.sub(_NUMBER_RANGE, r"\1 to \2")


def _speak_number_word(match: re.Match[str]) -> str:
    written = match.group(1)
    spoken = _NUMBER_WORD_FORMS[written.lower()]
    return (spoken.capitalize() if written[0].isupper() else spoken) + " "


def _speak_latin(match: re.Match[str]) -> str:
    abbreviation = match.group(1).lower()
    spoken = _LATIN_FORMS[abbreviation]
    if abbreviation == "etc":  # the others always precede what they introduce
        spoken += _kept_period(match.string, match.end())
    return spoken


def _speak_saint_or_street(match: re.Match[str]) -> str:
    if _NAME_FOLLOWS.match(match.string, match.end()):
        return "Saint"
    return "Street" + _kept_period(match.string, match.end())


def _kept_period(text: str, end: int) -> str:
    """The period of an expanded abbreviation, kept when it also ends the sentence."""
    if _ONLY_SPACE_LEFT.match(text, end):
        return "."
    return "" if _SENTENCE_CONTINUES.match(text, end) else "."


def _speak_money(match: re.Match[str]) -> str:
    symbol, whole, fraction, scale = match.groups()
    one, many, sub_one, sub_many = _CURRENCY_SYMBOLS[symbol]
    if scale:
        scale_word = _SCALE_LETTERS.get(scale.lower(), scale.lower())
        amount = whole if fraction is None else f"{whole} point {' '.join(fraction)}"
        return f"{amount} {scale_word} {many}"
    if fraction is None or (len(fraction) == 2 and int(fraction) == 0):
        return f"{int(whole)} {one if int(whole) == 1 else many}"
    if len(fraction) != 2 or not sub_many:
        return f"{whole} point {' '.join(fraction)} {many}"
    cents = int(fraction)
    cents_words = f"{cents} {sub_one if cents == 1 else sub_many}"
    if int(whole) == 0:
        return cents_words
    return f"{int(whole)} {one if int(whole) == 1 else many} {cents_words}"


def _speak_time(match: re.Match[str]) -> str:
    hour, minutes, meridiem, bare_hour, bare_meridiem = match.groups()
    if bare_hour is not None:
        return f"{int(bare_hour)} {bare_meridiem.upper()} M" + _kept_period_after_time(match)
    if minutes == "00":
        spoken = f"{int(hour)}" if meridiem else f"{int(hour)} o'clock"
    elif minutes.startswith("0"):
        spoken = f"{int(hour)} oh {minutes[1]}"
    else:
        spoken = f"{int(hour)} {minutes}"
    if meridiem:
        spoken += f" {meridiem.upper()} M"
    return spoken + _kept_period_after_time(match)


def _kept_period_after_time(match: re.Match[str]) -> str:
    """ "10 a.m." at the end of a sentence ends with its period: keep one."""
    written = match.group()
    if not written.endswith("."):
        return ""
    return _kept_period(match.string, match.end())


def _speak_degrees(match: re.Match[str]) -> str:
    digit, scale = match.groups()
    unit = {"C": " Celsius", "F": " Fahrenheit"}.get(scale or "", "")
    return f"{digit} degrees{unit}"


def _speak_decimal(match: re.Match[str]) -> str:
    whole, fraction = match.groups()
    return f"{whole} point {' '.join(fraction)}"


def _tidy_whitespace(text: TracedText) -> TracedText:
    """Each line's words joined by one space, the lines that hold any by one newline:
    ``"\\n".join(" ".join(line.split()) for line in text.splitlines())`` less its empty lines."""
    return text.sub(_UNTIDY, _tidied)


def _tidied(match: re.Match[str]) -> str:
    if match.start() == 0 or match.end() == len(match.string):
        return ""
    return "\n" if _LINE_BOUNDARY.search(match.group()) else " "
