"""Lexicons as tables: both formats, languages, longest match first, case, and bad files."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from voicestream.cli.app import app
from voicestream.engine.phonemes import load_vocab
from voicestream.speech.settings import read_lexicons
from voicestream.text.lexicon import Lexicon, LexiconError
from voicestream.text.markup import Said, Voicing
from voicestream.text.spans import TracedText

VOCAB = frozenset(load_vocab())

PLS = """<?xml version="1.0" encoding="UTF-8"?>
<lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon" alphabet="ipa" xml:lang="en-US">
  <lexeme><grapheme>Xarelto</grapheme><phoneme>zəɹˈɛltoʊ</phoneme></lexeme>
  <lexeme><grapheme>WHO</grapheme><alias>World Health Organization</alias></lexeme>
  <lexeme><grapheme>New York</grapheme><grapheme>NYC</grapheme><phoneme>nuː jɔːɹk</phoneme></lexeme>
  <lexeme><grapheme>New</grapheme><phoneme>nuː</phoneme></lexeme>
</lexicon>"""


def _applied(lexicon: Lexicon, text: str, language: str = "en-us") -> list[tuple]:
    parts = lexicon.apply(Said(TracedText(text), Voicing(language)), VOCAB)
    return [
        ("said", part.text.text) if isinstance(part, Said) else ("pronounced", part.phonemes, part.word, part.span)
        for part in parts
    ]


@pytest.mark.parametrize(("text", "expected"), [
    ("Take Xarelto daily", [("said", "Take "), ("pronounced", "zəɹˈɛltoʊ", "Xarelto", (5, 12)), ("said", " daily")]),
    ("XARELTO and xarelto", [("pronounced", "zəɹˈɛltoʊ", "XARELTO", (0, 7)), ("said", " and "),
                             ("pronounced", "zəɹˈɛltoʊ", "xarelto", (12, 19))]),
    ("Xareltos", [("said", "Xareltos")]),
    ("the WHO said", [("said", "the "), ("said", "World Health Organization"), ("said", " said")]),
    ("who said", [("said", "who said")]),
    ("New York is new", [("pronounced", "nuː jɔːɹk", "New York", (0, 8)), ("said", " is "),
                         ("pronounced", "nuː", "new", (12, 15))]),
    ("in NYC.", [("said", "in "), ("pronounced", "nuː jɔːɹk", "NYC", (3, 6)), ("said", ".")]),
])
def test_pls_entries_match_whole_words_longest_first(text: str, expected: list[tuple]) -> None:
    assert _applied(Lexicon.from_pls(PLS), text) == expected


def test_a_pls_lexicon_applies_to_its_language_only() -> None:
    assert _applied(Lexicon.from_pls(PLS), "Xarelto", "es") == [("said", "Xarelto")]


def test_a_plain_lexicon_has_language_sections() -> None:
    lexicon = Lexicon.from_tsv("# a comment\nKokoro\tkˈOkəɹO\n# language: es\nHola\tˈola\n")
    assert _applied(lexicon, "Kokoro", "fr-fr") == [("pronounced", "kˈOkəɹO", "Kokoro", (0, 6))]
    assert _applied(lexicon, "Hola", "en-us") == [("said", "Hola")]
    assert _applied(lexicon, "hola", "es") == [("pronounced", "ˈola", "hola", (0, 4))]


def test_unspaced_languages_match_anywhere() -> None:
    lexicon = Lexicon.from_tsv("# language: ja\n東京\tkokoɾo\n")
    assert _applied(lexicon, "東京に", "ja") == [("pronounced", "kokoɾo", "東京", (0, 2)), ("said", "に")]


def test_later_lexicons_win(tmp_path: Path) -> None:
    first, second = tmp_path / "a.pls", tmp_path / "b.tsv"
    first.write_text(PLS, encoding="utf-8")
    second.write_text("Xarelto\tksɐɹˈɛltO\n", encoding="utf-8")
    assert _applied(read_lexicons((first, second)), "Xarelto")[0][1] == "ksɐɹˈɛltO"


@pytest.mark.parametrize(("text", "problem"), [
    ("Kokoro kˈOkəɹO\n", "line 1: write a word, a tab and its IPA"),
    ("# language: xx\nKokoro\tkO\n", "not supported"),
    ("<lexicon alphabet='x-sampa'><lexeme><grapheme>a</grapheme><phoneme>a</phoneme></lexeme></lexicon>", "x-sampa"),
    ("<lexicon><lexeme><grapheme>a</grapheme></lexeme></lexicon>", "lexeme 1"),
    ("<lexicon><lexeme>", "malformed lexicon"),
    ('<!DOCTYPE l [<!ENTITY a "aaa">]><lexicon/>', "DTD or entities"),
    ("<voices/>", "root element must be <lexicon>"),
])
def test_bad_lexicons_say_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(LexiconError, match=problem):
        Lexicon.from_text(text)


def test_serve_refuses_a_lexicon_with_an_unknown_phoneme_before_loading(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_text("Kokoro\tkˈO§\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["serve", "--lexicon", str(bad)], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert "'§'" in result.output
