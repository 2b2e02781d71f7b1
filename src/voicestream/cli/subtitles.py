"""Word timestamps as subtitles: WebVTT or SRT phrase cues, and a JSON list of words.

A cue is a phrase: words up to a sentence or clause mark, at most `MAX_CUE_WORDS` words or
`MAX_CUE_S` seconds, and never across a pause of `MAX_GAP_S`. WebVTT cues carry each word's
start inside the cue (``<00:00:01.250>word``, the cue timestamps WebVTT allows for
karaoke-style display); SRT has no such tags, so its cues are the phrases alone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from voicestream.engine.alignment import TimedWord

MAX_CUE_WORDS = 10
MAX_CUE_S = 5.0
MAX_GAP_S = 0.6
_PHRASE_ENDS = tuple(".!?;:,…。！？、，；：")


def phrases(words: Sequence[TimedWord]) -> list[list[TimedWord]]:
    """``words`` cut into cues (see the module's rules)."""
    cues: list[list[TimedWord]] = []
    for word in words:
        current = cues[-1] if cues else None
        if (
            current is None
            or current[-1].word.endswith(_PHRASE_ENDS)
            or len(current) >= MAX_CUE_WORDS
            or word.end_s - current[0].start_s > MAX_CUE_S
            or word.start_s - current[-1].end_s > MAX_GAP_S
        ):
            cues.append([word])
        else:
            current.append(word)
    return cues


def _clock(seconds: float, separator: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"{hours:02d}:{minutes:02d}:{rest // 1000:02d}{separator}{rest % 1000:03d}"


def _joined(words: Sequence[TimedWord], spaced: bool) -> str:
    return (" " if spaced else "").join(w.word for w in words)


def _spaced(words: Sequence[TimedWord]) -> bool:
    """Words of a language written with spaces (not Japanese or Chinese characters)."""
    return not any("\u3040" <= ch <= "\u9fff" for w in words for ch in w.word)


def to_webvtt(words: Sequence[TimedWord]) -> str:
    """A WebVTT file: one cue per phrase, each later word preceded by its start time."""
    spaced = _spaced(words)
    blocks = ["WEBVTT"]
    for cue in phrases(words):
        start, end = cue[0].start_s, max(cue[-1].end_s, cue[0].start_s + 0.001)
        text = cue[0].word
        for word in cue[1:]:
            stamp = min(max(word.start_s, start + 0.001), end - 0.001)
            text += (" " if spaced else "") + f"<{_clock(stamp, '.')}>{word.word}"
        blocks.append(f"{_clock(start, '.')} --> {_clock(end, '.')}\n{text}")
    return "\n\n".join(blocks) + "\n"


def to_srt(words: Sequence[TimedWord]) -> str:
    """An SRT file: one numbered cue per phrase."""
    spaced = _spaced(words)
    blocks = []
    for index, cue in enumerate(phrases(words), 1):
        end = max(cue[-1].end_s, cue[0].start_s + 0.001)
        blocks.append(f"{index}\n{_clock(cue[0].start_s, ',')} --> {_clock(end, ',')}\n{_joined(cue, spaced)}")
    return "\n\n".join(blocks) + "\n"


def to_json(words: Sequence[TimedWord]) -> str:
    """The words as a JSON list of ``{"word", "start_s", "end_s"}``."""
    return json.dumps([asdict(w) for w in words], ensure_ascii=False, indent=1)
