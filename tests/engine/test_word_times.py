"""Word timestamps from the real model: every written word, in order, inside the audio,
through the first-clause cut, `speed`, normalization, and in Japanese and Chinese."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from voicestream.engine import KokoroEngine
from voicestream.engine.alignment import TimedWord
from voicestream.engine.offline import stream


def timed(engine: KokoroEngine, text: str, voice: str = "af_heart", speed: float = 1.0, cut: bool = True):
    pieces = list(stream(engine, text, voice, speed, cut_first_clause=cut, words=True))
    audio = np.concatenate([piece.audio for piece in pieces])
    return [word for piece in pieces for word in piece.words], audio, pieces


def rms(audio: np.ndarray) -> float:
    return float(np.sqrt(np.mean(audio.astype(np.float64) ** 2))) if audio.size else 0.0


def assert_in_order_inside(words: list[TimedWord], audio: np.ndarray, sample_rate: int = 24_000) -> None:
    """Words in order, not overlapping, inside the audio; what follows the last word is the
    end's silence (quiet), and what precedes the first is not speech either."""
    assert words[0].start_s >= 0
    for before, after in itertools.pairwise(words):
        assert before.start_s <= before.end_s <= after.start_s <= after.end_s
    assert words[-1].end_s <= audio.size / sample_rate + 1e-9  # float sums of the pieces aside
    speech = audio[int(words[0].start_s * sample_rate) : int(words[-1].end_s * sample_rate)]
    after_last = audio[int((words[-1].end_s + 0.05) * sample_rate) :]
    before_first = audio[: max(0, int((words[0].start_s - 0.05) * sample_rate))]
    assert rms(after_last) < 0.15 * rms(speech)
    assert rms(before_first) < 0.15 * rms(speech)


def test_every_word_of_several_sentences_in_order(engine: KokoroEngine) -> None:
    text = "The rain stopped at noon. We walked to the old bridge and back. Nobody else came."
    words, audio, pieces = timed(engine, text)
    assert len(pieces) == 3
    assert [w.word for w in words] == text.split()
    assert_in_order_inside(words, audio)
    assert all(w.end_s - w.start_s > 0.04 for w in words)


def test_words_survive_the_first_clause_cut(engine: KokoroEngine) -> None:
    text = "When the long meeting finally ended, everyone walked out into the warm evening air."
    words, audio, pieces = timed(engine, text, cut=True)
    assert len(pieces) == 2 and pieces[1].words[0].word == "everyone"
    assert [w.word for w in words] == text.split()
    assert_in_order_inside(words, audio)
    pause_start = pieces[0].audio.size / engine.sample_rate
    assert pieces[1].words[0].start_s >= pause_start + 0.1  # after the clause's pause


def test_times_scale_with_speed(engine: KokoroEngine) -> None:
    text = "Speaking faster makes every word shorter."
    slow, _, _ = timed(engine, text, speed=1.0)
    fast, fast_audio, _ = timed(engine, text, speed=2.0)
    assert [w.word for w in fast] == [w.word for w in slow]
    assert_in_order_inside(fast, fast_audio)
    ratio = (fast[-1].end_s - fast[0].start_s) / (slow[-1].end_s - slow[0].start_s)
    assert ratio == pytest.approx(0.5, abs=0.08)


def test_words_keep_what_the_user_wrote(engine: KokoroEngine) -> None:
    text = "Dr. Lee paid $5 for **two** tickets."
    words, audio, _ = timed(engine, text)
    assert [w.word for w in words] == ["Dr.", "Lee", "paid", "$5", "for", "two", "tickets."]
    assert [text[w.start_char : w.end_char] for w in words] == [w.word for w in words]
    assert_in_order_inside(words, audio)
    dollars = words[3]
    assert dollars.end_s - dollars.start_s > words[2].end_s - words[2].start_s  # "five dollars" is long


@pytest.mark.parametrize(
    ("text", "voice"),
    [("東京は今日、とても暑いです。明日は雨でしょう。", "jf_alpha"), ("今天天气很好，我们去公园散步吧。", "zf_xiaobei")],
)
def test_japanese_and_chinese_words(engine: KokoroEngine, text: str, voice: str) -> None:
    words, audio, _ = timed(engine, text, voice)
    assert "".join(w.word for w in words) == "".join(ch for ch in text if ch not in "、。，")
    assert len(words) >= 6
    assert_in_order_inside(words, audio)


def test_asking_for_words_does_not_change_the_audio(engine: KokoroEngine) -> None:
    """The cuts (the first clause, the break word) are the same with or without word times."""
    text = "Every morning the old fisherman walks down to the harbor because he likes the quiet water."
    with_words = list(stream(engine, text, words=True))
    without = list(stream(engine, text, words=False))
    assert len(with_words) == len(without) == 2  # cut before "because"
    assert all(np.array_equal(a.audio, b.audio) for a, b in zip(with_words, without, strict=True))
    assert with_words[1].words[0].word == "because" and with_words[1].words[0].start_char == text.index("because")
