"""Numbers and titles spoken in Spanish, French, Italian and Portuguese.

The English rules of :mod:`voicestream.text.normalize` (currency, "3.5" read "point",
"Dr." read "Doctor") would make a Spanish voice say English words, so other languages get
their own: numbers written the way that language writes them ("1.500", "3,5", "1 500")
become words with ``num2words``, "%" becomes "por ciento" and its kin, and common titles
("Sra.", "Mme", "Dott.ssa") are written out. Hindi, Japanese and Chinese numbers are left
to their G2P, which reads them in its own language (espeak-ng, OpenJTalk, cn2an).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass

from num2words import num2words

from voicestream.text.spans import TracedText


@dataclass(frozen=True)
class SpokenForms:
    """How one language speaks numbers and titles."""

    num2words_code: str
    decimal_word: str
    percent_word: str
    titles: Mapping[str, str]
    """Written title (with its periods) to its spoken form; matched before a capital."""


SPOKEN_FORMS: Mapping[str, SpokenForms] = {
    "es": SpokenForms("es", "coma", "por ciento", {
        "Sr.": "señor", "Sra.": "señora", "Srta.": "señorita", "Sres.": "señores",
        "Dr.": "doctor", "Dra.": "doctora", "Prof.": "profesor", "Profa.": "profesora",
        "Ud.": "usted", "Uds.": "ustedes", "D.": "don", "Dña.": "doña",
    }),
    "fr-fr": SpokenForms("fr", "virgule", "pour cent", {
        "M.": "monsieur", "MM.": "messieurs", "Mme": "madame", "Mmes": "mesdames",
        "Mlle": "mademoiselle", "Mlles": "mesdemoiselles", "Dr": "docteur", "Dr.": "docteur",
        "Pr": "professeur", "Pr.": "professeur", "Me": "maître",
    }),
    "it": SpokenForms("it", "virgola", "per cento", {
        "Sig.": "signor", "Sig.ra": "signora", "Sig.na": "signorina", "Sigg.": "signori",
        "Dott.": "dottor", "Dott.ssa": "dottoressa", "Dr.": "dottor", "Prof.": "professor",
        "Prof.ssa": "professoressa", "Avv.": "avvocato", "Ing.": "ingegner",
    }),
    "pt-br": SpokenForms("pt_BR", "vírgula", "por cento", {
        "Sr.": "senhor", "Sra.": "senhora", "Srta.": "senhorita", "Dr.": "doutor",
        "Dra.": "doutora", "Prof.": "professor", "Profa.": "professora",
    }),
}

_GROUPED = r"\d{1,3}(?:[.\u00a0\u202f ]\d{3})+(?!\d)"
_NUMBER = re.compile(rf"(?<![\w.,])(?P<whole>{_GROUPED}|\d+)(?:,(?P<fraction>\d+))?(?![\w]|[.,]\d)")
_PERCENT = re.compile(r"(\d)[ \t\u00a0\u202f]?%")


def _title_pattern(titles: Mapping[str, str]) -> re.Pattern[str]:
    written = sorted(titles, key=len, reverse=True)
    return re.compile(r"(?<![\w.])(" + "|".join(re.escape(t) for t in written) + r")(?=[ \t\u00a0]+[A-ZÀ-Ý])")


_TITLE_PATTERNS = {language: _title_pattern(forms.titles) for language, forms in SPOKEN_FORMS.items()}


MAX_SPOKEN_DIGITS = 15
"""Longer runs of digits (an id, a card number) are read digit by digit; num2words also
refuses numbers past its largest scale word."""


@functools.lru_cache(maxsize=4096)
def _spoken_number(number: int, code: str) -> str:
    """num2words, remembered: it takes 20 to 900 µs a number, and a text may hold
    thousands of them (a long id is read one digit at a time)."""
    return num2words(number, lang=code)


def _number_words(digits: str, forms: SpokenForms) -> str:
    if len(digits) > MAX_SPOKEN_DIGITS:
        return " ".join(_spoken_number(int(digit), forms.num2words_code) for digit in digits)
    return _spoken_number(int(digits), forms.num2words_code)


def _speak_number(match: re.Match[str], forms: SpokenForms) -> str:
    whole = re.sub(r"\D", "", match["whole"])
    spoken = _number_words(whole, forms)
    fraction = match["fraction"]
    if fraction is None:
        return spoken
    if fraction.startswith("0"):
        fraction_words = " ".join(_number_words(digit, forms) for digit in fraction)
    else:
        fraction_words = _number_words(fraction, forms)
    return f"{spoken} {forms.decimal_word} {fraction_words}"


def speak_in_language(text: TracedText, language: str) -> TracedText:
    """``text`` with titles, percentages and numbers written out in ``language``; other
    languages (and those numbers their G2P reads) unchanged."""
    forms = SPOKEN_FORMS.get(language)
    if forms is None:
        return text
    text = text.sub(_TITLE_PATTERNS[language], lambda m: forms.titles[m[1]])
    text = text.sub(_PERCENT, rf"\1 {forms.percent_word}")
    return text.sub(_NUMBER, lambda m: _speak_number(m, forms))
