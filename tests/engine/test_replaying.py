"""The tests' replaying engine (`tests.replaying`) gives a piece's real audio again, and
nothing it did not see rendered to the end."""

from __future__ import annotations

import numpy as np
from tests.replaying import ReplayingEngine

from voicestream.engine import KokoroEngine


def test_a_piece_is_replayed_as_rendered_and_one_left_early_renders_again(windowed: KokoroEngine) -> None:
    replaying = ReplayingEngine(windowed)
    piece = next(iter(replaying.plan("Hello there, my friend.")))
    assert piece.windowed  # a first piece in parts: one can be left after the first

    left = replaying.render_parts(piece, "af_heart", 1.0)
    next(left)
    left.close()
    first = list(replaying.render_parts(piece, "af_heart", 1.0))
    assert (replaying.rendered, replaying.replayed) == (2, 0)  # the piece left early was not kept
    assert len(first) > 1

    again = list(replaying.render_parts(piece, "af_heart", 1.0, windowed.max_threads))
    again[0].audio[:] = 0  # a caller changing its copy changes nothing kept
    third = list(replaying.render_parts(piece, "af_heart", 1.0))
    assert (replaying.rendered, replaying.replayed) == (2, 2)
    for replayed in (again[1:], third[1:]):
        assert all(np.array_equal(a.audio, b.audio) for a, b in zip(first[1:], replayed, strict=True))
    assert np.array_equal(first[0].audio, third[0].audio)
    assert [part.more for part in third] == [part.more for part in first]
    assert [part.words for part in third] == [part.words for part in first]
