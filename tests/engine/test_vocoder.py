"""The vocoder window by window: the graph cut, the windows, the silences fitted as parts come."""

from __future__ import annotations

import dataclasses
import functools
import itertools

import numpy as np
import onnxruntime as ort
import pytest

from voicestream.bench.asr import transcribe, word_errors
from voicestream.bench.texts import BLOCK, LATENCY_ANSWER, LONE_SENTENCE, ONE_SENTENCE
from voicestream.engine import KokoroEngine
from voicestream.engine.graph import load_graph
from voicestream.engine.kokoro import RenderedPiece, session_options
from voicestream.engine.offline import render_whole
from voicestream.engine.silence import SpeechFit, fit_to_speech
from voicestream.engine.vocoder import (
    FIRST_WINDOW_S,
    plan_windows,
    silent_edges,
    speech_frames,
    word_seams,
)

RATE = 24_000


def _tone(seconds: float) -> np.ndarray:
    return (0.5 * np.sin(2 * np.pi * 200 * np.arange(round(seconds * RATE)) / RATE)).astype(np.float32)


def _silence(seconds: float) -> np.ndarray:
    return np.zeros(round(seconds * RATE), np.float32)


@pytest.mark.parametrize("cuts", [[0.1], [0.35, 0.36, 0.9], [0.5, 1.0, 1.2, 1.6], [0.05, 0.1, 0.15, 1.9]])
def test_speech_fit_in_parts_joins_into_the_whole_fit(cuts: list[float]) -> None:
    audio = np.concatenate([_silence(0.3), _tone(0.4), _silence(0.2), _tone(0.3), _silence(0.6)])
    whole, trim = fit_to_speech(audio, RATE, before_s=0.02, after_s=0.33)
    fit = SpeechFit(RATE, 0.02, 0.33)
    bounds = [0, *(round(cut * RATE) for cut in cuts), audio.size]
    parts = [fit.push(audio[a:b]) for a, b in itertools.pairwise(bounds)]
    parts.append(fit.finish())
    np.testing.assert_array_equal(np.concatenate(parts), whole)
    assert fit.trim == trim
    assert parts[0].size == 0 or cuts[0] > 0.3  # nothing goes out before the first sound has come


def test_a_part_with_speech_after_it_goes_out_whole_and_the_parts_still_join_into_the_whole_fit() -> None:
    """A window that ends in a pause between words, with more speech after it, gives out its
    quiet at once instead of holding it for the next window; the parts still join into the
    whole fit, whose tail only the last part cuts."""
    audio = np.concatenate([_silence(0.3), _tone(0.4), _silence(0.2), _tone(0.3), _silence(0.6)])
    whole, trim = fit_to_speech(audio, RATE, before_s=0.02, after_s=0.33)
    pause_ends = round(0.85 * RATE)  # the first window ends inside the pause, before the second tone
    held, released = SpeechFit(RATE, 0.02, 0.33), SpeechFit(RATE, 0.02, 0.33)
    first_held = held.push(audio[:pause_ends])
    first_released = released.push(audio[:pause_ends], speech_follows=True)
    lead = trim.head_removed - trim.head_padded  # what the head's fit took off the front
    assert first_released.size == pause_ends - lead  # the pause's quiet went out with it
    assert first_held.size < pause_ends - lead - round(0.1 * RATE)  # held: at least 100 ms of the pause
    parts = [first_released, released.push(audio[pause_ends:]), released.finish()]
    np.testing.assert_array_equal(np.concatenate(parts), whole)
    assert released.trim == trim


def test_speech_fit_keeps_audio_with_no_sound_whole() -> None:
    fit = SpeechFit(RATE, 0.02, 0.33)
    quiet = _silence(0.5)
    assert fit.push(quiet).size == 0
    np.testing.assert_array_equal(fit.finish(), quiet)


def test_windows_cover_the_range_grow_and_meet_between_words() -> None:
    windows = plan_windows(10, 500, 40, seams=[55, 110, 300])
    assert windows[0][0] == 10 and windows[-1][1] == 500
    assert all(a[1] == b[0] for a, b in itertools.pairwise(windows))  # contiguous
    assert windows[0] == (10, 55)  # the first seam at least 40 frames in
    assert windows[1] == (55, 110)  # 45 frames on: the seam at 110 is within reach of 100
    lengths = [high - low for low, high in windows]
    assert all(later >= sum(lengths[:i]) or i == len(lengths) - 1 for i, later in enumerate(lengths) if i)
    assert plan_windows(0, 50, 40) == [(0, 50)]  # a remainder shorter than a first window joins it


def test_word_seams_are_the_middles_of_the_spaces() -> None:
    # tokens: pad, a, space, b, pad with durations 3, 2, 4, 1, 5 (frames of 600 samples)
    assert word_seams([0, 43, 16, 44, 0], [3, 2, 4, 1, 5], space=16) == [14]  # (5 + 9) feature frames



def test_the_silent_edges_are_not_rendered_past_a_margin() -> None:
    # pad, comma, a, space, b, full stop, pad: durations in frames of 600 samples
    tokens, durations = [0, 3, 43, 16, 44, 4, 0], [14, 2, 3, 1, 4, 6, 1]
    assert silent_edges(tokens, durations, frozenset({0, 3, 4, 16})) == (32, 14)  # feature frames
    assert speech_frames((28, 40), 98) == (16, 70)  # 12 feature frames kept at each end
    assert speech_frames((6, 10), 30) == (0, 30)  # less silence than the margin: all of it


def test_the_cut_graph_run_whole_is_the_model_bit_for_bit(engine: KokoroEngine) -> None:
    graph = load_graph(engine.files.model_path)
    assert graph.split is not None
    piece = next(engine.plan(LONE_SENTENCE, cut_first_clause=False))
    feed = engine.model_inputs(piece, "af_heart", 1.0)
    assert feed is not None
    whole = ort.InferenceSession(graph.model, session_options(1), providers=["CPUExecutionProvider"])
    expected = np.asarray(whole.run(None, feed)[0]).ravel()
    model = engine.split_model(1)
    np.testing.assert_array_equal(model.whole(model.front(feed)), expected)


@functools.cache
def _first_piece(engine: KokoroEngine, text: str) -> tuple[list[RenderedPiece], RenderedPiece]:
    """The first piece of ``text`` in parts (every core) and whole (one thread), on the
    windowed engine: rendered once for the tests below."""
    piece = next(engine.plan(text, words=True))
    parts = list(engine.render_parts(piece, "af_heart", 1.0, engine.max_threads))
    return parts, render_whole(engine, dataclasses.replace(piece, windowed=False), "af_heart", 1.0)


def test_a_silent_listeners_first_piece_comes_in_parts_the_first_short(windowed: KokoroEngine) -> None:
    engine = windowed
    piece = next(engine.plan(LONE_SENTENCE, words=True))
    assert piece.windowed
    parts, whole = _first_piece(engine, LONE_SENTENCE)
    assert len(parts) >= 3 and all(part.more for part in parts[:-1]) and not parts[-1].more
    # the first part: the onset, then the first window (from 150 ms before the first phoneme,
    # on to the next word's seam within another 250 ms): well under half the piece
    assert parts[0].audio.size <= round((engine.first_window_s + 0.27) * RATE) < whole.audio.size / 2
    joined = np.concatenate([part.audio for part in parts])
    assert abs(joined.size - whole.audio.size) <= 0.05 * RATE  # the same speech, fitted alike
    words = [w for part in parts for w in part.words]
    # the words but the last come first; the last, once the audio's end is known, with the last part
    assert len(parts[0].words) == len(whole.words) - 1 and not any(part.words for part in parts[1:-1])
    assert len(parts[-1].words) == 1
    assert [w.word for w in words] == [w.word for w in whole.words]
    assert all(a.end_s <= b.start_s + 1e-9 for a, b in itertools.pairwise(words))  # in order, no overlap
    assert words[-1].start_s < words[-1].end_s <= joined.size / RATE  # the last ends inside the audio
    assert max(abs(a.start_s - b.start_s) for a, b in zip(words, whole.words, strict=True)) < 0.03
    # Whisper hears the words (a seam may still sound like a comma: "speech, let's" costs two)
    spoken = " ".join(w.word for w in whole.words)  # the piece's own words: its sentence may be cut in two
    errors, count = word_errors(spoken, transcribe(joined, RATE))
    assert errors <= 2, (errors, count, transcribe(joined, RATE))


def test_a_first_window_of_zero_renders_the_first_piece_whole(whole_pieces: KokoroEngine) -> None:
    piece = next(whole_pieces.plan(LONE_SENTENCE))
    assert not piece.windowed
    assert len(list(whole_pieces.render_parts(piece, "af_heart", 1.0))) == 1


def test_the_first_window_is_on_by_default_where_the_audio_is_streamed(engine: KokoroEngine) -> None:
    """The server's and the engine's default, for a listener who hears nothing yet."""
    from voicestream.speech.settings import ServerSettings

    assert engine.first_window_s == ServerSettings().first_window_s == FIRST_WINDOW_S
    assert next(engine.plan(LONE_SENTENCE)).windowed
    assert not next(engine.plan(LONE_SENTENCE, cut_first_clause=False)).windowed  # a listener already hearing


def _level_db(audio: np.ndarray) -> np.ndarray:
    frames = audio[: audio.size // 240 * 240].reshape(-1, 240)  # 10 ms
    return 10 * np.log10((frames**2).mean(axis=1) + 1e-10)


def test_windows_keep_the_whole_pieces_loudness(windowed: KokoroEngine) -> None:
    """The vocoder normalizes over the frames it is given: windows of speech alone came out
    1.5 dB quieter than the whole piece (the median over the loud 10 ms frames, averaged over
    these five sentences); with the piece's share of silence beside them, 0.5 dB. The first
    sentence's renders are the previous test's (`_first_piece`), not made twice."""
    medians = []
    for text in (LONE_SENTENCE, ONE_SENTENCE, *BLOCK.split(". ")[:2], LATENCY_ANSWER.split(". ")[0]):
        pieces, rendered = _first_piece(windowed, text)
        parts, whole = np.concatenate([part.audio for part in pieces]), rendered.audio
        size = min(parts.size, whole.size)
        ours, theirs = _level_db(parts[:size]), _level_db(whole[:size])
        loud = theirs > -40
        medians.append(float(np.median(ours[loud] - theirs[loud])))
    assert abs(float(np.mean(medians))) < 1.0, medians
