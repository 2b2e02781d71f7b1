"""The session's engine with its renders replayed: for the tests of what surrounds a render.

Most server, client and agent tests check the protocol around the model (frames, events,
word times, budgets, errors, resumes) and speak the same few sentences again and again:
measured on tests/server and tests/client in one process, 60 % of the model's run time went
to inputs it had already run (docs/TESTING.md). `ReplayingEngine` renders a piece for real
the first time it is asked for it and gives the same parts again the next times, at once.

Everything but `render_parts` is the real engine's (the plan, the voices, the validation,
the thread counts). A replayed piece is the real model's audio for exactly that piece: the
key is the whole `Piece` (phonemes, words, silences, windowed or whole), the voice, the
speed and the first window's length. The thread count is not in it: a piece replayed on
another count than it was made on is still that piece's audio from the real model (the
engine tests compare thread counts on the engine itself). A piece is kept once its last
part is made; one left before that renders again the next time.

Measured on tests/server and tests/client in one process (`-n 0`): 165 pieces rendered and
872 replayed; 277 passed in 393 s against 474 s rendering every piece.

Tests whose feature *is* the render's time (pipelining, first audio beside monologues) must
not use it: they take `rendering_speech_server` or `make_rendering_speech_server`, which
render every piece; the tests that take `engine` itself render every piece too.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Generator
from typing import Any

from voicestream.engine import KokoroEngine
from voicestream.engine.kokoro import Piece, RenderedPiece

MAX_REPLAY_BYTES = 256 * 1024 * 1024
"""What the replays may hold (float32 audio): about 45 minutes of speech, oldest dropped first."""

_Key = tuple[Piece, str, float, float]


class ReplayingEngine:
    """`engine`, its renders replayed after the first (see the module docstring)."""

    def __init__(self, engine: KokoroEngine, max_bytes: int = MAX_REPLAY_BYTES) -> None:
        self._engine = engine
        self._max_bytes = max_bytes
        self._replays: OrderedDict[_Key, list[RenderedPiece]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.rendered = 0
        """Pieces rendered by the model (kept for their next time, if read to the end)."""
        self.replayed = 0
        """Pieces given from an earlier render."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def render_parts(
        self, piece: Piece, voice: str, speed: float, threads: int = 1
    ) -> Generator[RenderedPiece, int | None, None]:
        """`KokoroEngine.render_parts`, replayed when the same piece was rendered before."""
        key = (piece, voice, speed, self._engine.first_window_s)
        with self._lock:
            parts = self._replays.get(key)
            if parts is not None:
                self._replays.move_to_end(key)
                self.replayed += 1
            else:
                self.rendered += 1
        if parts is not None:
            return _replay(parts)
        return self._recording(key, self._engine.render_parts(piece, voice, speed, threads))

    def _recording(
        self, key: _Key, parts: Generator[RenderedPiece, int | None, None]
    ) -> Generator[RenderedPiece, int | None, None]:
        kept: list[RenderedPiece] = []
        sent: int | None = None
        try:
            while True:
                try:
                    part = parts.send(sent)
                except StopIteration:
                    break
                kept.append(part)
                if not part.more:  # the piece's last part: callers stop reading here
                    self._keep(key, kept)
                sent = yield _copy(part)
        finally:
            parts.close()

    def _keep(self, key: _Key, parts: list[RenderedPiece]) -> None:
        size = sum(part.audio.nbytes for part in parts)
        with self._lock:
            if key in self._replays or size > self._max_bytes:
                return
            self._replays[key] = parts
            self._bytes += size
            while self._bytes > self._max_bytes:
                _, dropped = self._replays.popitem(last=False)
                self._bytes -= sum(part.audio.nbytes for part in dropped)


def _replay(parts: list[RenderedPiece]) -> Generator[RenderedPiece, int | None, None]:
    """The kept parts again (a thread count sent in changes nothing: they are made)."""
    for part in parts:
        yield _copy(part)


def _copy(part: RenderedPiece) -> RenderedPiece:
    """A part the caller may change without changing the kept one."""
    return RenderedPiece(part.audio.copy(), list(part.words), part.more)
