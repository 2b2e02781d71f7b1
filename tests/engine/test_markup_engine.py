"""The engine follows markup and lexicons: fixed phonemes are the model's input, a break is
that much silence, a span's voice and speed are its piece's, and word times keep the
writer's words with their offsets in the text as sent. Real model, short texts."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
from tests.pauses import longest_pause_s, speech_s

from voicestream.engine import KokoroEngine
from voicestream.engine.errors import EmptyTextError, InvalidMarkupError, UnknownVoiceError
from voicestream.engine.offline import stream
from voicestream.text.lexicon import Lexicon


def _tokens(engine: KokoroEngine, phonemes: str) -> list[int]:
    return engine._phonemizer.tokenize(phonemes)


def _model_tokens(engine: KokoroEngine, text: str, voice: str = "af_heart", lexicon: Lexicon | None = None) -> list[int]:
    tokens: list[int] = []
    for piece in engine.plan(text, engine.language_for(voice), lexicon=lexicon):
        feed = engine.model_inputs(piece, voice, 1.0)
        assert feed is not None
        tokens += [int(t) for t in next(iter(feed.values())).ravel()[1:-1]]
    return tokens


def _contains(tokens: list[int], run: list[int]) -> bool:
    return any(tokens[i : i + len(run)] == run for i in range(len(tokens) - len(run) + 1))


@pytest.mark.parametrize("text", [
    'Say <phoneme ph="ˈɔɹɪndʒ">Grintle</phoneme> now.',
    "Say [Grintle](/ˈɔɹɪndʒ/) now.",
    '<speak>Say <phoneme alphabet="ipa" ph="ˈɔɹɪndʒ">Grintle</phoneme> now.</speak>',
])
def test_fixed_phonemes_are_the_models_input(engine: KokoroEngine, text: str) -> None:
    tokens = _model_tokens(engine, text)
    assert _contains(tokens, _tokens(engine, "ˈɔɹɪndʒ"))
    assert not _contains(tokens, _tokens(engine, engine._phonemizer.phonemize("Grintle")))


def test_fixed_phonemes_keep_the_writers_word_and_offsets(engine: KokoroEngine) -> None:
    text = 'Please call <phoneme ph="ˈɔɹɪndʒ">Grintle</phoneme> today.'
    rendered = list(stream(engine, text, words=True))
    words = [word for piece in rendered for word in piece.words]
    assert [w.word for w in words] == ["Please", "call", "Grintle", "today."]
    for word in words:
        assert text[word.start_char : word.end_char] == word.word
    assert all(a.end_s <= b.start_s + 1e-6 for a, b in itertools.pairwise(words))


@pytest.mark.parametrize(("language", "word", "ipa", "text"), [
    ("en-us", "Xarelto", "zəɹˈɛltoʊ", "Take Xarelto daily. XARELTO works."),
    ("es", "Kokoro", "kokˈoɾo", "Hola Kokoro, ¿qué tal?"),
    ("ja", "東京", "kokoɾo", "東京に行きます。"),
])
def test_a_lexicon_gives_its_phonemes_every_time(engine: KokoroEngine, language: str, word: str, ipa: str, text: str) -> None:
    voice = {"en-us": "af_heart", "es": "ef_dora", "ja": "jf_alpha"}[language]
    lexicon = Lexicon.from_tsv(f"# language: {language}\n{word}\t{ipa}\n")
    tokens = _model_tokens(engine, text, voice, lexicon)
    run = _tokens(engine, ipa)
    count = sum(tokens[i : i + len(run)] == run for i in range(len(tokens)))
    assert count == text.lower().count(word.lower())
    assert _model_tokens(engine, text, voice) != tokens


def test_a_lexicon_of_another_language_is_not_applied(engine: KokoroEngine) -> None:
    lexicon = Lexicon.from_tsv("# language: es\nXarelto\tzəɹˈɛltoʊ\n")
    assert _model_tokens(engine, "Take Xarelto daily.", lexicon=lexicon) == _model_tokens(engine, "Take Xarelto daily.")


def test_the_engines_own_lexicon_applies_to_every_plan(engine: KokoroEngine) -> None:
    saved, engine.lexicon = engine.lexicon, Lexicon.from_pls(
        '<lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon" alphabet="ipa" '
        'xml:lang="en-US"><lexeme><grapheme>Flomper</grapheme><phoneme>ˈæpəl</phoneme></lexeme></lexicon>'
    )
    try:
        assert _contains(_model_tokens(engine, "A Flomper a day."), _tokens(engine, "ˈæpəl"))
    finally:
        engine.lexicon = saved


def test_a_break_is_that_much_silence(engine: KokoroEngine) -> None:
    text = 'Please hold<break time="700ms"/> while I check.'
    audio = np.concatenate([piece.audio for piece in stream(engine, text)])
    plain = np.concatenate([piece.audio for piece in stream(engine, "Please hold while I check.")])
    assert abs(longest_pause_s(audio, engine.sample_rate) - 0.7) <= 0.025
    assert longest_pause_s(plain, engine.sample_rate) < 0.3


def test_a_span_reads_in_its_own_voice_and_speed(engine: KokoroEngine) -> None:
    text = '<speak>Hi. <voice name="am_adam"><prosody rate="fast">Hello.</prosody></voice></speak>'
    pieces = list(engine.plan(text, "en-us"))
    assert [(p.voice, p.speed) for p in pieces] == [(None, 1.0), ("am_adam", 1.25)]
    first, second = (engine.model_inputs(p, "af_heart", 1.2) for p in pieces)
    assert first is not None and second is not None
    assert float(first["speed"][0]) == pytest.approx(1.2)
    assert float(second["speed"][0]) == pytest.approx(1.5)
    tokens = len(second["style"])
    assert not np.array_equal(second["style"], engine._voices.style("af_heart", tokens))


def test_say_as_characters_is_much_longer_than_the_word(engine: KokoroEngine) -> None:
    spelled = np.concatenate([p.audio for p in stream(engine, '<say-as interpret-as="characters">Kokoro</say-as>')])
    word = np.concatenate([p.audio for p in stream(engine, "Kokoro")])
    assert speech_s(spelled, engine.sample_rate) > 1.6 * speech_s(word, engine.sample_rate)


def test_refusals_are_typed_and_quick(engine: KokoroEngine) -> None:
    bomb = ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>'
            "<speak>&lol2;</speak>")
    started = time.perf_counter()
    with pytest.raises(InvalidMarkupError):
        engine.check(bomb, "af_heart", 1.0)
    assert time.perf_counter() - started < 0.05
    with pytest.raises(UnknownVoiceError):
        engine.check('<speak><voice name="zz_nobody">x</voice></speak>', "af_heart", 1.0)
    with pytest.raises(EmptyTextError):
        engine.check("<speak> </speak>", "af_heart", 1.0)


def test_breaks_alone_are_silence(engine: KokoroEngine) -> None:
    audio = np.concatenate([p.audio for p in stream(engine, '<speak><break time="1s"/></speak>')])
    assert audio.size == engine.sample_rate
    assert not audio.any()
