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
from voicestream.text.spoken_forms import speak_in_language

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


def normalize_for_speech(text: str, language: str = "en-us") -> str:
    """Return `text` as it should be spoken: markup, emoji and HTML removed, numbers,
    currency, times and common abbreviations written as words.

    The rules for symbols and numbers are English ones and apply to English (``en-*``)
    only; other languages get theirs from :func:`speak_in_language`."""
    # removing markup can expose more: "🎉 - item", "**# x**"
    text = _until_stable(_strip_markup, _EMOJI.sub("", html.unescape(text)))
    if language.startswith("en"):
        rewrite = _speak_symbols
    else:
        rewrite = functools.partial(speak_in_language, language=language)
    text = _rewrite_outside_urls(_tidy_whitespace(text), rewrite)
    return _tidy_whitespace(text)


def _strip_markup(text: str) -> str:
    text = _CODE_FENCE_BLOCK.sub("", text)
    text = _CODE_FENCE_MARKER.sub("", text)
    text = _HTML_COMMENT.sub("", text)
    text = _AUTOLINK.sub(r"\1", text)
    text = _HTML_BLOCK_TAG.sub("\n", text)
    text = _HTML_TAG.sub("", text)
    text = _IMAGE.sub(_keep_unless(""), text)
    text = _LINK.sub(_keep_unless(r"\1"), text)
    text = _REFERENCE_LINK.sub(_keep_unless(r"\1"), text)
    text = _HORIZONTAL_RULE.sub("", text)
    text = _LINE_MARKERS.sub("", text)
    text = _TABLE_RULE.sub("", text)
    text = _TABLE_ROW.sub(_speak_table_row, text)
    text = _rewrite_outside_urls(text, _strip_inline_markup)
    return text


def _strip_inline_markup(text: str) -> str:
    text = _INLINE_CODE.sub(r"\1", text)
    text = _until_stable(_strip_emphasis, text)  # nested: ***both*** or **a _b_ c**
    return _STRAY_MARKUP.sub("", text)


def _strip_emphasis(text: str) -> str:
    text = _strong_markers(text)
    text = _EMPHASIS.sub(r"\2", text)
    return _STRIKETHROUGH.sub(r"\1", text)


MAX_PASSES = 8
"""Passes of a markup rule over the text at most. Real markup settles in two or three;
contrived nesting ("[[[[a](x)](x)](x)](x)" a thousand deep) would take a pass per level, each
over the whole text, and is left with its innermost marks instead."""


def _until_stable(strip: Callable[[str], str], text: str) -> str:
    for _ in range(MAX_PASSES):
        stripped = strip(text)
        if stripped == text:
            break
        text = stripped
    return text


def _keep_unless(template: str) -> Callable[[re.Match[str]], str]:
    """A replacement for the link patterns: `template` for a whole link, the text as it
    was for a failed candidate."""
    return lambda match: match.expand(template) if match["end"] else match.group()


def _strong_markers(text: str) -> str:
    """`_STRONG.sub(r"\2", text)` without rescanning a line for each marker that cannot
    close: once a "**" (or "__") finds no closing one on its line, no later one on that
    line can find one either."""
    parts: list[str] = []
    last = 0
    hopeless_until = {"**": -1, "__": -1}
    position = 0
    while opener := _STRONG_OPENER.search(text, position):
        start = opener.start()
        position = start + 1
        if start < hopeless_until[opener[1]]:
            continue
        if match := _STRONG.match(text, start):
            parts += (text[last:start], match[2])
            last = position = match.end()
        else:
            line_end = text.find("\n", start)
            hopeless_until[opener[1]] = len(text) if line_end < 0 else line_end
    parts.append(text[last:])
    return "".join(parts)


def _speak_table_row(match: re.Match[str]) -> str:
    cells = (cell.strip() for cell in match.group(1).split("|"))
    return ", ".join(cell for cell in cells if cell)


def _rewrite_outside_urls(text: str, rewrite: Callable[[str], str]) -> str:
    """Apply `rewrite` to the text between URLs and e-mail addresses only."""
    parts: list[str] = []
    last = 0
    for match in _urls_and_emails(text):
        parts.append(rewrite(text[last : match.start()]))
        parts.append(match.group())
        last = match.end()
    parts.append(rewrite(text[last:]))
    return "".join(parts)


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


def _speak_symbols(text: str) -> str:
    text = _AMPERSAND.sub(" and ", text)
    text = _MONTH.sub(lambda m: MONTHS[m.group(1)], text)
    text = _SAINT_OR_STREET.sub(_speak_saint_or_street, text)
    text = _TITLE.sub(lambda m: TITLES[m.group(1)], text)
    text = _NUMBER_WORDS.sub(_speak_number_word, text)
    text = _LATIN.sub(_speak_latin, text)
    text = _POSTFIX.sub(
        lambda m: _POSTFIX_FORMS[m.group(1)] + _kept_period(m.string, m.end()), text
    )
    text = _THOUSANDS_SEPARATOR.sub("", text)
    text = _MONEY.sub(_speak_money, text)
    text = _PERCENT.sub(r"\1 percent", text)
    text = _TIME.sub(_speak_time, text)
    text = _DEGREES.sub(_speak_degrees, text)
    text = _DECIMAL.sub(_speak_decimal, text)
    return _NUMBER_RANGE.sub(r"\1 to \2", text)


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


def _tidy_whitespace(text: str) -> str:
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)
