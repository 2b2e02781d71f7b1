"""The Kokoro engine with the real int8 model: durations, chunking, styles, typed errors."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from tests.reference import HELLO_SECONDS

from voicestream.engine import (
    EmptyTextError,
    InvalidSpeedError,
    KokoroEngine,
    RenderedPiece,
    TextTooLongError,
    UnknownVoiceError,
    offline,
)
from voicestream.engine.offline import render_whole, stream, synthesize
from voicestream.engine.phonemes import (
    MAX_PHONEMES,
    split_before_break_word,
    split_first_clause,
    split_phonemes,
)
from voicestream.engine.voices import VoiceBank


def test_reference_sentence_duration(engine: KokoroEngine) -> None:
    """The reference deployment returned 73,200 bytes (1.525 s) for this sentence: Kokoro's
    0.36 s of leading and 0.5 s of trailing silence included. voicestream cuts them to 20 ms
    and 330 ms (`voicestream.engine.silence`), so the same speech lasts 1.006 s."""
    audio = synthesize(engine, "Hello there.", "af_heart")
    assert audio.dtype == np.float32
    assert len(audio) / engine.sample_rate == pytest.approx(HELLO_SECONDS, rel=0.03)
    assert 0.05 < float(np.abs(audio).max()) <= 1.0


def test_long_text_is_split_within_the_phoneme_window(engine: KokoroEngine) -> None:
    """A sentence past the model's 510-phoneme window, spoken at double speed: the split and
    the model's limit are the same at any speed, and the audio (the vocoder's cost) is half."""
    text = " ".join(["This sentence keeps going, clause after clause, and never stops"] * 8) + "."
    pieces = list(engine.plan(text))
    assert sum(len(p.phonemes) for p in pieces) > MAX_PHONEMES  # one piece could not hold it
    assert all(0 < len(p.phonemes) <= MAX_PHONEMES for p in pieces)
    assert pieces[0].first and pieces[-1].last and not any(p.first for p in pieces[1:])
    chunks = [rendered.audio for rendered in stream(engine, text, speed=2.0)]
    assert len(chunks) == len(pieces)
    assert sum(c.size for c in chunks) / engine.sample_rate > 12  # all of it: 16 s, about 33 at speed 1


def test_sentences_stream_one_by_one(engine: KokoroEngine) -> None:
    chunks = list(stream(engine, "First sentence here. Second one follows. And a third."))
    assert len(chunks) == 3


def test_split_phonemes_prefers_clauses_then_words() -> None:
    phonemes = "ɐ " * 200 + ", " + "b " * 200
    batches = split_phonemes(phonemes, limit=510)
    assert all(len(b) <= 510 for b in batches)
    assert "".join(batches).replace(" ", "") == phonemes.replace(" ", "")
    assert split_phonemes("x" * 1200, limit=510) == ["x" * 510, "x" * 510, "x" * 180]


def test_style_row_follows_phoneme_count(engine: KokoroEngine) -> None:
    bank = VoiceBank(engine.files.voices_dir)
    pack = bank.pack("af_heart")
    assert pack.shape == (510, 1, 256) and pack.dtype == np.float32
    assert np.array_equal(bank.style("af_heart", 10), pack[9])
    assert np.array_equal(bank.style("af_heart", 9999), pack[-1])


def test_speed_changes_duration(engine: KokoroEngine) -> None:
    normal = synthesize(engine, "Speaking at a different rate.", speed=1.0)
    fast = synthesize(engine, "Speaking at a different rate.", speed=2.0)
    slow = synthesize(engine, "Speaking at a different rate.", speed=0.5)
    assert len(fast) < 0.7 * len(normal) < len(normal) < 0.7 * len(slow)


@pytest.mark.parametrize(("text", "voice", "speed", "error", "names"), [
    ("", "af_heart", 1.0, EmptyTextError, "empty"),
    ("   \n", "af_heart", 1.0, EmptyTextError, "empty"),
    ("hi", "xx_nobody", 1.0, UnknownVoiceError, "af_heart"),
    ("hi", "af_heart", 2.5, InvalidSpeedError, "0.5 and 2.0"),
    ("hi", "af_heart", 0.1, InvalidSpeedError, "0.5 and 2.0"),
    ("x" * 20_001, "af_heart", 1.0, TextTooLongError, "20000"),
])
def test_bad_input_gets_a_typed_error_naming_what_is_allowed(
    engine: KokoroEngine, text: str, voice: str, speed: float, error: type[Exception], names: str
) -> None:
    with pytest.raises(error) as raised:
        synthesize(engine, text, voice, speed)
    assert names in str(raised.value)


async def test_async_stream_never_blocks_the_event_loop(engine: KokoroEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every model run happens off the loop: the loop ticks while each run is in progress (a
    run on the loop's thread would hold it for the whole run: no tick inside). Counted, not
    timed against a bound, so a loaded machine only adds ticks."""
    ticks: list[float] = []
    runs: list[tuple[float, float]] = []
    render = offline.render_whole

    def timed_render(*args: object, **kwargs: object) -> RenderedPiece:
        started = time.monotonic()
        rendered = render(*args, **kwargs)  # type: ignore[arg-type]
        runs.append((started, time.monotonic()))
        return rendered

    monkeypatch.setattr(offline, "render_whole", timed_render)

    async def ticker() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.005)

    task = asyncio.create_task(ticker())
    chunks = [chunk async for chunk in offline.astream(engine, "The event loop keeps running. Even during synthesis.")]
    task.cancel()
    assert len(chunks) == len(runs) == 2
    assert all(any(start < tick < end for tick in ticks) for start, end in runs), (runs, len(ticks))


def test_every_voice_speaks(engine: KokoroEngine) -> None:
    assert len(engine.voices) == 54
    for voice in ("af_heart", "am_michael", "bf_emma", "bm_george"):
        assert synthesize(engine, "Okay.", voice).size > 0


def test_a_long_first_sentence_is_cut_at_its_first_clause() -> None:
    head = "ðə mˈiːɾɪŋ hɐz mˈuːvd tə θˈɜːzdeɪ ˌæftɚnˈuːn,"
    tail = "sˌoʊ plˈiːz bɹˈɪŋ ðə kwˈɔːɹɾɚli fˈɪɡjɚz."
    assert split_first_clause(f"{head} {tail}") == [head, tail]
    assert split_first_clause("hˈaɪ, ðˈɛɹ.") == ["hˈaɪ, ðˈɛɹ."]  # too short to be worth a cut
    assert split_first_clause(f"jˈɛs, {tail}") == [f"jˈɛs, {tail}"]  # a short head: no cut
    long_tail = f"{tail} {tail} {tail}"  # would take longer to render than the head plays
    assert split_first_clause(f"{head} {long_tail}") == [f"{head} {long_tail}"]
    later = f"{head} {tail[:-1]}, {tail} {tail}"  # the first mark leaves too much; the next one does not
    assert split_first_clause(later) == [f"{head} {tail[:-1]},", f"{tail} {tail}"]


def test_the_first_piece_of_a_request_ends_at_a_clause(engine: KokoroEngine) -> None:
    text = "The meeting has moved to Thursday afternoon, so please bring the quarterly figures. Thanks, see you."
    pieces = list(engine.plan(text))
    assert [piece.text for piece in pieces].count(pieces[0].text) == 2  # one sentence, two pieces
    assert pieces[0].phonemes.endswith(",") and not pieces[0].ends_sentence and pieces[1].ends_sentence
    assert len(pieces) == 3  # only the first sentence is cut: "Thanks, see you." stays whole
    audio = [render_whole(engine, piece, "af_heart", 1.0).audio for piece in pieces[:2]]
    assert all(chunk.size > 0.5 * 24_000 for chunk in audio)  # both halves are speech
    # for a listener whose audio is already playing the sentence stays whole
    assert len(list(engine.plan(text, cut_first_clause=False))) == 2


def test_a_comma_less_first_sentence_is_cut_before_a_break_word(engine: KokoroEngine) -> None:
    sentence = "Streaming speech lets an agent start talking before it has finished thinking."
    assert split_before_break_word(sentence) == ["Streaming speech lets an agent start talking",
                                                 "before it has finished thinking."]
    assert split_before_break_word("Please bring the figures for the meeting.") == [
        "Please bring the figures for the meeting."]  # "for" would leave three words after it
    pieces = list(engine.plan(sentence))
    assert len(pieces) == 2 and not pieces[0].ends_sentence and pieces[1].ends_sentence
    assert len(list(engine.plan(sentence, cut_first_clause=False))) == 1  # a playing listener: whole
    assert len(list(engine.plan(sentence, "es"))) == 1  # the break words are English
