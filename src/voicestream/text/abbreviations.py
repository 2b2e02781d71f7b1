"""Word lists shared by the sentence chunker and the speech normalizer.

Abbreviations are grouped by how they behave before a capitalized word, because that is
the only place where a period after them is ambiguous: before a lower-case word no
period ends a sentence, and before a digit no period after an abbreviation does
("p. 55", "Jan. 5", "No. 7").

Entries written with a capital first letter ("Jan", "Sat") only match capitalized
words, so that "He sat. Mary left." still splits; lower-case entries match any case.
"""

from __future__ import annotations

import re
from enum import Enum


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


class AbbreviationKind(Enum):
    """How a period after an abbreviation behaves before a capitalized word."""

    PREFIX = "prefix"
    """Precedes what it qualifies ("Dr. Smith", "e.g. Paris"): never ends a sentence."""

    POSTFIX = "postfix"
    """Often inside a name ("U.S. Government", "Jonas E. Smith", "St. Michael"): ends a
    sentence only before a word that typically starts one ("U.S. How about you?")."""

    TERMINAL = "terminal"
    """Usually closes a phrase ("etc.", "10 a.m."): ends a sentence before any
    capitalized word except a name that commonly follows it (a weekday, month, zone)."""


TITLES: dict[str, str] = {
    "Mr": "Mister",
    "Mrs": "Missus",
    "Ms": "Miz",
    "Mx": "Mix",
    "Dr": "Doctor",
    "Prof": "Professor",
    "Rev": "Reverend",
    "Hon": "Honorable",
    "Gen": "General",
    "Col": "Colonel",
    "Capt": "Captain",
    "Lt": "Lieutenant",
    "Sgt": "Sergeant",
    "Maj": "Major",
    "Cmdr": "Commander",
    "Adm": "Admiral",
    "Gov": "Governor",
    "Sen": "Senator",
    "Rep": "Representative",
    "Pres": "President",
    "Supt": "Superintendent",
    "Insp": "Inspector",
    "Det": "Detective",
    "Fr": "Father",
    "Mt": "Mount",
    "Messrs": "Messieurs",
    "Mme": "Madame",
    "Mlle": "Mademoiselle",
}
"""Titles and their spoken forms; a period after them never ends a sentence."""

MONTHS: dict[str, str] = {
    "Jan": "January",
    "Feb": "February",
    "Mar": "March",
    "Apr": "April",
    "Jun": "June",
    "Jul": "July",
    "Aug": "August",
    "Sep": "September",
    "Sept": "September",
    "Oct": "October",
    "Nov": "November",
    "Dec": "December",
}

DAY_MONTHS: frozenset[str] = (frozenset(MONTHS.values()) - {"March"}) | _words(
    """Januar Februar März Mai Juni Juli Oktober Dezember janvier février mars avril juin
    juillet août septembre octobre novembre décembre"""
)
"""Month names that follow an ordinal day written "3." ("am 3. Juli", "le 3. juin");
"March" (like "May", which has no abbreviation) also starts English sentences."""

WEEKDAYS: frozenset[str] = _words("Mon Tue Tues Wed Thu Thur Thurs Fri Sat Sun")

FOREIGN_TITLES: frozenset[str] = _words(
    """Sra Srta Sres Dra Profa Ud Uds Vd Vds Dña Sig Sigg Dott Avv Ing MM Mmes Mlles Pr"""
)
"""Spanish, Italian, French and Portuguese titles ("Sra. Ruiz", "Dott. Rossi"); "Sr", "Mme"
and "Dr" are already among the English ones."""

_PREFIX: frozenset[str] = frozenset(TITLES) | FOREIGN_TITLES | _words(
    "e.g i.e cf viz vs approx pp eq eqs Fig Figs Vol Vols Ch Chap Sec Ref Refs Tel Dept Est"
)

_POSTFIX: frozenset[str] = (
    frozenset(MONTHS)
    | WEEKDAYS
    | _words(
        """jr sr st co corp inc ltd llc plc bros esq ave blvd rd ft univ ph.d m.d b.a m.a b.sc
        m.sc d.c"""
    )
)

_TERMINAL: frozenset[str] = _words("etc a.m p.m no nos nr N° n°")

_NUMBER_PREFIXES: frozenset[str] = _words("fig figs vol vols ch chap sec art op ex tab para ver")
"""Ordinary words that, written before a number, are abbreviations ("see fig. 3")."""


_INITIALISM = re.compile(r"(?:[A-Za-z]\.)*[A-Za-z]")
"""A single letter or letters joined by periods ("E", "p", "U.S", "R.T.C"), without the
final period."""


def _matches(word: str, entries: frozenset[str]) -> bool:
    """Whether `word` is one of `entries`, in the case rules of this module's docstring."""
    if word in entries:
        return True
    lowered = word.lower()
    if lowered in entries:
        return True
    return word[:1].isupper() and word.capitalize() in entries


def precedes_numbers(word: str) -> bool:
    """Whether a period after `word` is an abbreviation's when a number follows it."""
    return abbreviation_kind(word) is not None or word.lower() in _NUMBER_PREFIXES


def abbreviation_kind(word: str) -> AbbreviationKind | None:
    """Classify `word` (the text before a period, without that period), or None when it
    is an ordinary word whose period ends a sentence."""
    if not word:
        return None
    if _matches(word, _PREFIX):
        return AbbreviationKind.PREFIX
    if _matches(word, _TERMINAL):
        return AbbreviationKind.TERMINAL
    if _matches(word, _POSTFIX) or _INITIALISM.fullmatch(word):
        return AbbreviationKind.POSTFIX
    return None


SENTENCE_STARTERS: frozenset[str] = (
    # pronouns and determiners
    _words(
        """I You He She It We They This That These Those The A An My Your His Her Its Our
        Their There Here Some Many Most All Each Every Any Both One Nobody Everyone Someone"""
    )
    # question words and auxiliaries
    | _words(
        """What When Where Who Why How Which Whose Is Are Was Were Do Does Did Can Could Will
        Would Should Shall May Might Must Have Has Had"""
    )
    # connectives and sentence adverbs
    | _words(
        """But And So Or Then However Also Yet Still Thus Therefore Meanwhile Now Later After
        Before Today Tomorrow Yesterday In On At For From If As Since While Although Though
        Because Once Please Let Yes No Oh Well Thanks Thank"""
    )
    | frozenset(TITLES)
)
"""Capitalized words that, after an ambiguous abbreviation, signal a new sentence."""

NAMES_AFTER_TIME: frozenset[str] = (
    _words(
        """Monday Tuesday Wednesday Thursday Friday Saturday Sunday EST EDT CST CDT MST MDT
        PST PDT GMT UTC CET CEST BST IST JST ET CT MT PT Eastern Central Mountain Pacific"""
    )
    | frozenset(MONTHS.values())
    | frozenset(MONTHS)
    | WEEKDAYS
)
"""Capitalized words that commonly follow "a.m." or "etc." without a sentence break."""

FRONTED_TIME_PREPOSITIONS: frozenset[str] = _words(
    "at by around about before after until till from since"
)
"""Openers of a time phrase ("At 5 a.m.") that cannot be a sentence on its own."""
