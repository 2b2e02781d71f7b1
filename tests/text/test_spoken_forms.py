"""Normalization per language: English rules for English only, numbers and titles in the
text's own language."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicestream.text import normalize_for_speech


@pytest.mark.parametrize(("language", "written", "spoken"), [
    ("es", "La Sra. García tiene 1.500 euros.", "La señora García tiene mil quinientos euros."),
    ("es", "Son 3,5 kilos, el 20 %.", "Son tres coma cinco kilos, el veinte por ciento."),
    ("fr-fr", "M. Dupont et Mme Martin ont 1 500 livres.",
     "monsieur Dupont et madame Martin ont mille cinq cents livres."),
    ("fr-fr", "Il pèse 3,05 kg.", "Il pèse trois virgule zéro cinq kg."),
    ("it", "La Dott.ssa Rossi e il Sig. Bianchi hanno 12 gatti.",
     "La dottoressa Rossi e il signor Bianchi hanno dodici gatti."),
    ("pt-br", "O Sr. Silva tem 250 reais.", "O senhor Silva tem duzentos e cinquenta reais."),
])
def test_numbers_and_titles_are_spoken_in_the_texts_language(language: str, written: str, spoken: str) -> None:
    assert normalize_for_speech(written, language) == spoken


@pytest.mark.parametrize("language", ["es", "fr-fr", "it", "pt-br", "hi", "ja", "zh"])
def test_english_rules_stay_out_of_other_languages(language: str) -> None:
    spoken = normalize_for_speech("Dr. **Smith** paid $5 at 10:30 a.m.", language)
    assert "Doctor" not in spoken and "dollars" not in spoken and "**" not in spoken


@pytest.mark.parametrize(("language", "text"), [
    ("zh", "我有3个苹果。"), ("ja", "3人です。"), ("hi", "मेरे पास 3 किताबें हैं।"),
])
def test_numbers_of_cjk_and_hindi_are_left_to_their_g2p(language: str, text: str) -> None:
    assert normalize_for_speech(text, language) == text


def test_a_long_run_of_digits_is_read_digit_by_digit() -> None:
    assert normalize_for_speech("Código 1000000000000000000000000000.", "es").startswith("Código uno cero cero")


def test_english_keeps_its_rules() -> None:
    assert normalize_for_speech("Dr. Smith paid $5.", "en-gb") == "Doctor Smith paid 5 dollars."


@given(st.text(alphabet="0123456789., %SraDot" + "ñé ", max_size=40),
       st.sampled_from(["es", "fr-fr", "it", "pt-br"]))
def test_any_number_text_normalizes_without_error_and_is_stable(text: str, language: str) -> None:
    once = normalize_for_speech(text, language)
    assert normalize_for_speech(once, language) == once


@given(st.integers(0, 10**9), st.integers(0, 99), st.sampled_from(["es", "fr-fr", "it", "pt-br"]),
       st.sampled_from([".", " ", ""]))
def test_every_written_number_becomes_words(whole: int, fraction: int, language: str, grouping: str) -> None:
    written = f"{whole:,}".replace(",", grouping) + f",{fraction}"
    assert not any(char.isdigit() for char in normalize_for_speech(f"Son {written} metros.", language))
