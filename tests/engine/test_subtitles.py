"""`voicestream say --subtitles/--timestamps`: captions that real WebVTT and SRT parsers read,
with the words of the text, in order, inside the audio."""

from __future__ import annotations

import itertools
import json
import wave
from collections.abc import Iterator
from pathlib import Path

import pytest
import srt
import webvtt
from tests.engine.cli_runner import Cli

from voicestream.cli.subtitles import phrases, to_srt, to_webvtt
from voicestream.engine import offline
from voicestream.engine.alignment import TimedWord
from voicestream.engine.kokoro import RenderedPiece

TEXT = "Dr. Lee paid $5 for the tickets. The show starts at noon, so we should hurry."


@pytest.fixture
def timed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`say`'s timed render (`offline.stream` with words) made by the model once per input
    and replayed after: the same real pieces and words for the same engine, text, voice,
    speed, threads and language (as `tests.replaying` does for the server), so a second
    `say` of the same speech writes other files without rendering it again."""
    made: dict[tuple, list[RenderedPiece]] = {}
    render = offline.stream

    def stream(*args: object, **kwargs: object) -> Iterator[RenderedPiece]:
        key = (args, tuple(sorted(kwargs.items())))
        if key not in made:
            made[key] = list(render(*args, **kwargs))  # type: ignore[arg-type]
        return (RenderedPiece(piece.audio.copy(), list(piece.words), piece.more) for piece in made[key])

    monkeypatch.setattr(offline, "stream", stream)


@pytest.mark.usefixtures("timed_once")
def test_say_writes_subtitles_and_timestamps(run_cli: Cli, tmp_path: Path) -> None:
    audio, vtt, srt_file, stamps = (tmp_path / name for name in ("a.wav", "a.vtt", "a.srt", "w.json"))
    result = run_cli("say", TEXT, "-o", str(audio), "--subtitles", str(vtt), "--timestamps", str(stamps))
    assert result.returncode == 0, result.stderr
    with wave.open(str(audio)) as wav:
        audio_s = wav.getnframes() / wav.getframerate()
    words = json.loads(stamps.read_text(encoding="utf-8"))
    assert [w["word"] for w in words] == TEXT.split()
    captions = webvtt.read(str(vtt)).captions
    assert " ".join(c.text for c in captions) == TEXT
    assert all(a.end_in_seconds <= b.start_in_seconds for a, b in itertools.pairwise(captions))
    assert captions[-1].end_in_seconds <= audio_s + 0.001
    assert captions[0].raw_text.count("<00:") == len(captions[0].text.split()) - 1  # a time per later word

    result = run_cli("say", TEXT, "-o", str(audio), "--subtitles", str(srt_file))
    assert result.returncode == 0, result.stderr
    cues = list(srt.parse(srt_file.read_text(encoding="utf-8")))
    assert " ".join(cue.content for cue in cues) == TEXT
    assert [cue.index for cue in cues] == list(range(1, len(cues) + 1))


def test_phrases_end_at_punctuation_pauses_and_length() -> None:
    words = [TimedWord(word=w, start_s=i * 0.3, end_s=i * 0.3 + 0.25) for i, w in enumerate(["a", "b,", "c", "d", "e."])]
    words.append(TimedWord(word="late", start_s=5.0, end_s=5.3))
    assert [[w.word for w in cue] for cue in phrases(words)] == [["a", "b,"], ["c", "d", "e."], ["late"]]


def test_unspaced_words_join_without_spaces() -> None:
    words = [TimedWord(word=w, start_s=i * 0.4, end_s=i * 0.4 + 0.3) for i, w in enumerate(["今天", "天气", "很好"])]
    assert webvtt.from_string(to_webvtt(words)).captions[0].text == "今天天气很好"
    assert next(srt.parse(to_srt(words))).content == "今天天气很好"
