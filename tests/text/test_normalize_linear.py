"""No text makes the text layer slow: normalizing and chunking take time linear in the text.

A request may hold 20 000 characters (the engine's `DEFAULT_MAX_TEXT_CHARS`), and this work
holds the GIL, so a pattern that rescans a long run from each of its characters (4.7 s for
``"$" * 20000`` before the fix) stops every session and the server's pings with it.

How the time is judged, so that the tests hold on a fast or a slow, loaded machine: each
input is timed in the CPU time of the test's own thread (``time.thread_time``: waiting
for the CPU does not count, nor do the threads of servers and models that other tests of
the session left running in this process, which ``process_time`` counted: a loaded CI run
once measured 14.9 then 51.0 ms that way), at 5 000 and at 20 000 characters, beside
20 000 characters of ordinary prose, the three in turn three times and the best of each
kept (a noisy second hits all three). Four times the length must take less than eight
times as long (a linear cost takes four times, a quadratic one sixteen: a factor of two of
noise either way is allowed), with a few milliseconds of slack for timer grain on tiny
times; and the 20 000-character run must take less than sixteen times as long as the
prose (the worst text here, ampersands, takes about five times; the quadratic patterns
took over a hundred). The ratio catches a quadratic cost; the prose bound catches a cost
that is linear but far too slow, on the machine's own scale: a bound in seconds failed a
CI run whose machine took 359 ms for ampersands, where this one takes 207 ms and its
bound was 250 ms.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.thread_cpu import best_cpu_times

from voicestream.text import IncrementalSentenceChunker, normalize_for_speech
from voicestream.text.schedule import SENTENCES, ChunkSchedule

MAX_CHARS = 20_000
"""The engine's `DEFAULT_MAX_TEXT_CHARS` (not imported: the text layer is tested alone)."""
PROSE_FACTOR = 16
"""How many times as long as ordinary prose of its length an adversarial text may take."""
SLACK_S = 0.005
PROSE = (
    "The quick brown fox, who was 3 years old, jumped over the lazy dog on May 5. "
    "Dr. Smith paid $29.95 & left at 10:30; it was cold! "
)
LATENCY = ChunkSchedule(first_words=4)


def _repeat(unit: str, length: int) -> str:
    return (unit * (length // len(unit) + 1))[:length]


# name: (a repeated unit, or a function of the length); every pattern of the layer has a
# long run of what it matches here, found quadratic (or slower) before the fix where noted
ADVERSARIAL: dict[str, str | Callable[[int], str]] = {
    "dollars": "$",  # money: every "$" rescanned the whole run of symbols
    "digits": "1",  # e-mail local part, from every digit
    "letters": "a",  # e-mail local part
    "underscores": "_",
    "digit commas": "1,1,",
    "dotted letters": "a.a.",  # e-mail local part over dots
    "dotted digits": "1.1.",
    "initials": "A.",
    "latin": "e.g.",
    "decimals": "1.2",
    "dollar digits": "$1$1",
    "dollar decimals": "$1,0",
    "parentheses": "(",
    "dashes": "-",
    "dots": ".",  # the chunker's run of sentence marks
    "spaced dots": ". ",
    "emoji": "🎉",
    "url": lambda n: "http://" + "a" * (n - 7),
    "urls": "http://a ",
    "www": "www.",
    "addresses": "a@b.c+",
    "stars": "*",
    "backticks": "`",
    "hashes": "#",
    "headings": "# ",  # one heading mark removed per pass, a pass per mark
    "mixed line marks": "- > # ",
    "brackets": "[",  # link text, from every bracket
    "image openers": "![",
    "empty links": "[](",  # link address, from every bracket
    "reference links": "[a][",
    "nested links": lambda n: "[" * (n // 5) + "a" + "](x)" * (n // 5),
    "unclosed strong": "**a ",  # strong text, from every marker to the line's end
    "unclosed underscores": "__a ",
    "nested strong": lambda n: "**" * (n // 4) + "a" + "**" * (n // 4),
    "spaces": " ",  # table rule
    "table row of spaces": lambda n: "|" + " " * (n - 2) + "x",
    "pipes": "|",
    "tags": "<b>",
    "open tags": "<a <",
    "ampersands": "&",
    "entities": "&amp;",
    "etc": "etc. ",  # the rest of the text copied for every abbreviation
    "saints": "St. ",
    "titles": "Dr. ",
    "numbered": "1. ",
    "times": "1:1",
    "degrees": "1°",
    "ranges": "1–",
    "percents": "1%",
    "thousands": "1,000,",
    "lines": "a.\n",
    "clause marks after a word": lambda n: "a " + _repeat(", ", n - 2),  # latency mode
    "dashes after a word": lambda n: "a " + _repeat("- ", n - 2),  # word counts from the start
    "spaces between sentences": lambda n: "a." + " " * (n - 3) + "b",
}


def _text(name: str, length: int) -> str:
    unit = ADVERSARIAL[name]
    return unit(length) if callable(unit) else _repeat(unit, length)


def _assert_linear(work: Callable[[str], object], name: str, length: int = MAX_CHARS) -> None:
    small, big, prose = best_cpu_times(work, (_text(name, length // 4), _text(name, length), _repeat(PROSE, length)))
    assert big < 8 * small + SLACK_S, f"{name}: {small * 1000:.1f} ms, then {big * 1000:.1f} ms at four times the length"
    assert big < PROSE_FACTOR * prose + SLACK_S, (
        f"{name}: {big * 1000:.1f} ms at {length} characters, against {prose * 1000:.1f} ms for prose"
    )


def _chunk_whole(text: str, schedule: ChunkSchedule = SENTENCES) -> list[str]:
    chunker = IncrementalSentenceChunker(schedule)
    chunks = chunker.feed(text)
    return chunks + chunker.flush()


def _chunk_char_by_char(text: str) -> list[str]:
    chunker = IncrementalSentenceChunker(LATENCY)
    chunks = [chunk for char in text for chunk in chunker.feed(char)]
    return chunks + chunker.flush()


@pytest.mark.parametrize("name", ADVERSARIAL)
def test_normalizing_is_linear(name: str) -> None:
    _assert_linear(normalize_for_speech, name)


@pytest.mark.parametrize("name", ["digits", "digit commas", "times", "degrees", "numbered", "brackets", "headings"])
@pytest.mark.parametrize("language", ["es", "fr-fr"])
def test_normalizing_other_languages_is_linear(name: str, language: str) -> None:
    """Their numbers are spoken by num2words (up to 0.9 ms a number in French)."""
    _assert_linear(lambda text: normalize_for_speech(text, language), name)


@pytest.mark.parametrize("name", ADVERSARIAL)
def test_chunking_is_linear(name: str) -> None:
    _assert_linear(_chunk_whole, name)
    _assert_linear(lambda text: _chunk_whole(text, LATENCY), name)


@pytest.mark.parametrize(
    "name", ["dots", "spaced dots", "letters", "lines", "clause marks after a word", "dashes after a word", "etc"]
)
def test_chunking_char_by_char_is_linear_and_cuts_the_same(name: str) -> None:
    """A streamed answer arrives a few characters at a time: a decision waiting for more
    text must not rescan what it already read on every fragment."""
    text = _text(name, 4000)
    assert _chunk_char_by_char(text) == _chunk_whole(text, LATENCY)
    _assert_linear(_chunk_char_by_char, name, length=4000)


def test_long_runs_are_rewritten_as_before() -> None:
    """What the quadratic patterns gave (checked against them): failed candidates are kept
    whole, and those that succeed after them still do."""
    assert normalize_for_speech("[a](x) " + "[" * 5000 + "\n and [b](y).") == "a " + "[" * 5000 + "\nand b."
    assert normalize_for_speech("$" * 5000 + "5") == "5 dollars"
    assert normalize_for_speech("**a " * 1000 + "**b**") == "a " * 1000 + "b"
    assert normalize_for_speech("# " * 3000 + "Title") == "Title"
    assert normalize_for_speech("| a |" + " " * 3000 + "|\n|---|---|") == "a"
    assert normalize_for_speech("x a@b.c+d@e.f y") == "x a@b.c+d@e.f y"
