"""Text without markup is planned exactly as before the markup layer existed: the same
phonemes, silences, cuts and words, so its audio is bit for bit the same (the model's input
is the piece's phonemes, voice and speed, and nothing else). The reference below was printed
by `KokoroEngine.plan(text, language, words=True)` of the code before markup, lexicons and
inline phonemes were added."""

from __future__ import annotations

import pytest

from voicestream.engine import KokoroEngine
from voicestream.text.lexicon import Lexicon

REFERENCE = [('Hello there. How are you today?',
  'en-us',
  [('həlˈoʊ ðˈɛɹ.', 0.02, 0.02, True, False, True, ('Hello', 'there.'), ((0, 5), (6, 12))),
   ('hˌaʊ ɑːɹ juː tədˈeɪ?',
    0.32999999999999996,
    0.32999999999999996,
    False,
    True,
    False,
    ('How', 'are', 'you', 'today?'),
    ((13, 16), (17, 20), (21, 24), (25, 31)))]),
 ('Please hold while I check your account, it takes a moment before it has finished thinking.',
  'en-us',
  [('plˈiːz hˈoʊld wˌaɪl aɪ tʃˈɛk jʊɹ ɐkˈaʊnt,',
    0.02,
    0.02,
    True,
    False,
    True,
    ('Please', 'hold', 'while', 'I', 'check', 'your', 'account,'),
    ((0, 6), (7, 11), (12, 17), (18, 19), (20, 25), (26, 30), (31, 39))),
   ('ɪt tˈeɪks ɐ mˈoʊmənt bᵻfˌɔːɹ ɪt hɐz fˈɪnɪʃt θˈɪŋkɪŋ.',
    0.13,
    0.32999999999999996,
    False,
    True,
    False,
    ('it', 'takes', 'a', 'moment', 'before', 'it', 'has', 'finished', 'thinking.'),
    ((40, 42), (43, 48), (49, 50), (51, 57), (58, 64), (65, 67), (68, 71), (72, 80), (81, 90)))]),
 ('Dr. Smith paid $29.95 at 10:30 a.m. for **bold** [links](http://x.y) & more.',
  'en-us',
  [('dˈɑːktɚ smˈɪθ pˈeɪd twˈɛnti nˈaɪn dˈɑːlɚz nˈaɪnti fˈaɪv sˈɛnts',
    0.02,
    0.02,
    True,
    False,
    True,
    ('Dr.', 'Smith', 'paid', '$29.95'),
    ((0, 3), (4, 9), (10, 14), (15, 21))),
   ('æt tˈɛn θˈɜːɾi ɐ ˈɛm fɔːɹ bˈoʊld lˈɪŋks ænd mˈɔːɹ.',
    0.13,
    0.32999999999999996,
    False,
    True,
    False,
    ('at', '10:30 a.m.', 'for', 'bold', 'links', '&', 'more.'),
    ((22, 24), (25, 35), (36, 39), (42, 46), (50, 55), (69, 70), (71, 76)))]),
 ('<b>Bold</b> text with <i>tags</i> and a <br> break.',
  'en-us',
  [('bˈoʊld tˈɛkst wɪð tˈæɡz ænd ˈeɪ',
    0.02,
    0.02,
    True,
    False,
    True,
    ('Bold', 'text', 'with', 'tags', 'and', 'a'),
    ((3, 7), (12, 16), (17, 21), (25, 29), (34, 37), (38, 39))),
   ('bɹˈeɪk.', 0.32999999999999996, 0.32999999999999996, False, True, False, ('break.',), ((45, 51),))]),
 ('Hola, ¿cómo estás? Son las 3,5 horas.',
  'es',
  [('ˈola, kˈomo estˈas?', 0.02, 0.02, True, False, True, ('Hola,', '¿cómo', 'estás?'), ((0, 5), (6, 11), (12, 18))),
   ('sˈon las tɾˈes kˈoma θˈinko ˈoɾas.',
    0.32999999999999996,
    0.32999999999999996,
    False,
    True,
    False,
    ('Son', 'las', '3,5', 'horas.'),
    ((19, 22), (23, 26), (27, 30), (31, 37)))]),
 ('こんにちは。元気ですか?',
  'ja',
  [('koɲɲiʨiβa.', 0.02, 0.02, True, False, True, ('こんにちは',), ((0, 5),)),
   ('ɡeŋkʲi desɨ ka?',
    0.32999999999999996,
    0.32999999999999996,
    False,
    True,
    False,
    ('元気', 'です', 'か'),
    ((6, 8), (8, 10), (10, 11)))])]


def _planned(engine: KokoroEngine, text: str, language: str) -> list[tuple]:
    return [
        (p.phonemes, p.silence_before_s, p.silence_after_s, p.first, p.last, p.windowed,
         p.words.texts if p.words else None, p.words.spans if p.words else None)
        for p in engine.plan(text, language, words=True)
    ]


@pytest.mark.parametrize(("text", "language", "expected"), REFERENCE, ids=[t[:24] for t, _, _ in REFERENCE])
def test_plain_text_plans_as_before(engine: KokoroEngine, text: str, language: str, expected: list[tuple]) -> None:
    assert _planned(engine, text, language) == expected


def test_a_lexicon_that_lists_none_of_its_words_changes_nothing(engine: KokoroEngine) -> None:
    lexicon = Lexicon.from_tsv("Xarelto\tzəɹˈɛltoʊ\nKokoro\tkˈOkəɹO\n")
    saved, engine.lexicon = engine.lexicon, lexicon
    try:
        for text, language, expected in REFERENCE:
            assert _planned(engine, text, language) == expected
    finally:
        engine.lexicon = saved
