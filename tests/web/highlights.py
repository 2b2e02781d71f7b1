"""What a page's word highlighting must show, given the word times it received (placed in its
text by the page) and the highlights it recorded (the player's clock when each word lit up)."""

from __future__ import annotations

from typing import Any

# a word this long spans at least two of the player's position reports (about 21 ms each)
LONG_ENOUGH_S = 0.05


def check_highlights(words: list[dict[str, Any]], highlights: list[dict[str, Any]]) -> None:
    """Each highlight was taken at a play position inside that word's own times; they came
    in the order spoken; and every word long enough was highlighted, none skipped: the clock
    is the player's, in audio time, per request or sentence."""
    assert all(h["start_s"] <= h["seconds"] < h["end_s"] for h in highlights), highlights
    # a stall unlights the word and the audio's return lights it again: one word, told twice
    highlights = [h for i, h in enumerate(highlights) if i == 0 or h["start_s"] != highlights[i - 1]["start_s"]]
    assert [h["start_s"] for h in highlights] == sorted(h["start_s"] for h in highlights), highlights
    long_words = [w["text"] for w in words if w["found"] and w["end_s"] - w["start_s"] >= LONG_ENOUGH_S]
    assert long_words, words
    lit = [h["text"] for h in highlights if h["end_s"] - h["start_s"] >= LONG_ENOUGH_S]
    assert lit == long_words, (words, highlights)
