"""Every voice speaks its own language: per-language G2P reaches the real model, and a
multilingual Whisper (base) hears the right words.

Character error rates are computed on readings, so that the spelling Whisper picks does
not count: Chinese as toneless pinyin per character (simplified or traditional, the same
syllable), Japanese as katakana (kanji or kana, the same reading).
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np
import pytest
from tests.asr import load_whisper_base

from voicestream.agent.speech_input import WHISPER_RATE
from voicestream.audio import resample
from voicestream.bench.wer import edit_distance
from voicestream.engine.offline import synthesize

SENTENCES = {
    "es": ("ef_dora", "El perro corre por el parque todas las mañanas. Me gusta leer libros en la biblioteca.", 0.05),
    "it": ("if_sara", "Il treno per Roma parte domani mattina. Mia sorella lavora in un piccolo negozio.", 0.05),
    "fr-fr": ("ff_siwis", "Le chat dort tranquillement sur le canapé. Nous allons au marché ce matin.", 0.08),
    "pt-br": ("pf_dora", "O menino gosta de jogar futebol na praia. A comida da minha avó é muito gostosa.", 0.08),
    "zh": ("zf_xiaoxiao", "今天天气很好，我们一起去公园散步吧。", 0.15),
    "ja": ("jf_alpha", "今日はとても良い天気ですね。駅まで歩いて行きましょう。", 0.20),
}
WHISPER_LANGUAGE = {"es": "es", "it": "it", "fr-fr": "fr", "pt-br": "pt", "zh": "zh", "ja": "ja"}


@pytest.fixture(scope="module")
def whisper_base():
    return load_whisper_base()


def _reading(text: str, language: str) -> list[str]:
    """The units a character error rate counts: letters, or readings for Chinese and Japanese."""
    text = unicodedata.normalize("NFKC", text).lower()
    if language == "zh":
        from pypinyin import Style, lazy_pinyin

        han = "".join(re.findall(r"[\u4e00-\u9fff]", text))
        return lazy_pinyin(han, style=Style.NORMAL)
    if language == "ja":
        import pyopenjtalk

        return list(re.sub(r"[^\u30a0-\u30ff]", "", pyopenjtalk.g2p(text, kana=True)))
    return list(re.sub(r"[^\w]|_", "", text))


def character_error_rate(reference: str, hypothesis: str, language: str) -> float:
    ref = _reading(reference, language)
    return edit_distance(ref, _reading(hypothesis, language)) / max(len(ref), 1)


def _hear(whisper, audio: np.ndarray, rate: int, language: str) -> str:
    samples = resample(audio.astype(np.float32), rate, WHISPER_RATE)
    segments, _ = whisper.transcribe(samples, language=WHISPER_LANGUAGE[language], beam_size=1)
    return "".join(segment.text for segment in segments)


@pytest.mark.parametrize("language", list(SENTENCES))
def test_each_language_is_understood(engine, whisper_base, language: str) -> None:
    voice, text, limit = SENTENCES[language]
    heard = _hear(whisper_base, synthesize(engine, text, voice), engine.sample_rate, language)
    assert character_error_rate(text, heard, language) <= limit, (text, heard)


def test_hindi_is_phonemized_by_espeak_in_hindi(engine) -> None:
    """Whisper base is unreliable on Hindi, so the check is that Hindi phonemes reach the model:
    a Hindi voice reads the digit 3 as "tīn", where English espeak-ng says "three"."""
    text = "मेरे पास 3 किताबें हैं।"
    language = engine.language_for("hf_alpha")
    phonemes = " ".join(piece.phonemes for piece in engine.plan(text, language))
    assert language == "hi" and "pˈaːs tˈiːn kɪtˈaːb" in phonemes, phonemes
    assert "θɹˈiː" in " ".join(piece.phonemes for piece in engine.plan(text, "en-us"))
    seconds = len(synthesize(engine, text, "hf_alpha")) / engine.sample_rate
    assert 1.0 < seconds < 5.0


def test_lang_overrides_the_voices_language(engine, whisper_base) -> None:
    """An English voice told to read Spanish reads it as Spanish, not as English spelling."""
    text = SENTENCES["es"][1].split(". ")[0] + "."
    as_spanish = _hear(whisper_base, synthesize(engine, text, "af_heart", language="es"), engine.sample_rate, "es")
    as_english = _hear(whisper_base, synthesize(engine, text, "af_heart"), engine.sample_rate, "es")
    assert character_error_rate(text, as_spanish, "es") < character_error_rate(text, as_english, "es")
    assert character_error_rate(text, as_spanish, "es") <= 0.15, as_spanish


def test_a_blend_is_the_weighted_mean_of_its_packs(engine) -> None:
    from voicestream.engine.voices import VoiceBank
    from voicestream.protocol import parse_voice

    bank = VoiceBank(engine.files.voices_dir)
    mixed = bank.blended_pack(parse_voice("af_bella(3)+af_sky(1)"))
    assert np.allclose(mixed, 0.75 * bank.pack("af_bella") + 0.25 * bank.pack("af_sky"), atol=1e-6)
    assert mixed.dtype == np.float32 and mixed.shape == bank.pack("af_bella").shape
