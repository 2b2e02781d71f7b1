"""Chosen silences instead of the model's padding: cut on the audio, reported in samples."""

from __future__ import annotations

import numpy as np
import pytest

from voicestream.audio import first_audible_sample
from voicestream.engine import KokoroEngine
from voicestream.engine.offline import render_whole, synthesize
from voicestream.engine.silence import TAIL_S, Pauses, fit_to_speech

RATE = 24_000


def _lead(audio: np.ndarray) -> int:
    return first_audible_sample(audio, RATE)  # type: ignore[return-value]


def _trail(audio: np.ndarray) -> int:
    return first_audible_sample(audio[::-1], RATE)  # type: ignore[return-value]


def _speech(seconds: float) -> np.ndarray:
    return (0.5 * np.sin(2 * np.pi * 200 * np.arange(round(seconds * RATE)) / RATE)).astype(np.float32)


def test_the_models_silence_is_cut_to_the_chosen_lengths_and_reported() -> None:
    padded = np.concatenate([np.zeros(RATE, np.float32), _speech(0.5), np.zeros(RATE, np.float32)])
    fitted, trim = fit_to_speech(padded, RATE, before_s=0.02, after_s=0.33)
    assert _lead(fitted) == 480 and _trail(fitted) == round(0.33 * RATE)
    assert trim.head_padded == trim.tail_padded == 0
    assert trim.head_removed == _lead(padded) - 480 and trim.tail_removed == _trail(padded) - round(0.33 * RATE)
    assert fitted.size == padded.size - trim.head_removed - trim.tail_removed
    # a time in the model's output (the speech's start) moves by what was cut at the head
    assert trim.shift_s(1.0, RATE) == pytest.approx(1.0 - trim.head_removed / RATE)


def test_audio_with_less_silence_than_chosen_is_padded_with_zeros() -> None:
    speech = _speech(0.3)
    fitted, trim = fit_to_speech(speech, RATE, before_s=0.1, after_s=0.2)
    assert trim.head_removed == trim.tail_removed == 0
    assert trim.head_padded == 2_400 - _lead(speech) and trim.tail_padded == 4_800 - _trail(speech)
    assert not fitted[: trim.head_padded].any() and np.array_equal(fitted[trim.head_padded:][: speech.size], speech)
    assert trim.shift_s(0.0, RATE) == pytest.approx(trim.head_padded / RATE)


def test_inaudible_audio_is_kept_whole() -> None:
    quiet = np.full(RATE, 0.001, np.float32)
    fitted, trim = fit_to_speech(quiet, RATE, 0.02, 0.3)
    assert fitted is quiet and trim.head_removed == trim.head_padded == 0


def test_requests_start_at_their_first_sound_and_sentences_are_a_chosen_pause_apart(engine: KokoroEngine) -> None:
    pauses = engine.pauses
    first, second = synthesize(engine, "Hello there."), synthesize(engine, "See you soon.")
    assert _lead(first) == _lead(second) == round(pauses.leading_s * RATE)
    # sentences sent as separate requests, as an agent sends them
    assert _trail(first) + _lead(second) == pytest.approx(pauses.sentence_s * RATE, abs=1)
    # and within one request
    pieces = list(engine.plan("Hello there. See you soon."))
    audio = [render_whole(engine, piece, "af_heart", 1.0).audio for piece in pieces]
    assert _trail(audio[0]) + _lead(audio[1]) == pytest.approx(pauses.sentence_s * RATE, abs=1)
    assert _trail(audio[0]) == round(TAIL_S * RATE)


def test_the_pauses_are_the_engines_settings(engine: KokoroEngine) -> None:
    wide = KokoroEngine(engine.files, max_threads=1, pauses=Pauses(leading_s=0.1, sentence_s=0.5))
    audio = synthesize(wide, "Hello there.")
    assert _lead(audio) == 2_400 and _trail(audio) == round(0.4 * RATE)
