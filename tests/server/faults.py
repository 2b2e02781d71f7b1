"""Fault injection around the real parts: the real engine and encoders, made to fail on cue.

A request whose text contains a marker fails at one exact point; every other request runs
on the real model, so a test sees both the failure and that the rest goes on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from voicestream.audio import StreamEncoder
from voicestream.engine import KokoroEngine, Piece

PLAN_FAULT = "Plan fault here."
"""The scheduler's step fails before the engine runs (a bug outside the model call)."""
RENDER_FAULT = "Render fault here."
"""The model run itself fails."""
FINISH_FAULT_FORMAT = "flac"
"""Requests in this format get an encoder whose `finish` fails."""


class FaultyEngine:
    """The real engine, failing on the marker texts above."""

    def __init__(self, engine: KokoroEngine) -> None:
        self._engine = engine

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def plan(self, text: str, *args: Any, **kwargs: Any) -> Iterator[Piece]:
        if PLAN_FAULT in text:
            raise RuntimeError("injected fault: planning failed")
        return self._engine.plan(text, *args, **kwargs)

    def render_parts(self, piece: Piece, voice: str, speed: float, *args: Any) -> Any:
        if RENDER_FAULT in piece.text:
            raise RuntimeError("injected fault: the model run failed")
        return self._engine.render_parts(piece, voice, speed, *args)


class FinishFailsEncoder:
    """A real encoder whose final flush fails."""

    def __init__(self, encoder: StreamEncoder) -> None:
        self._encoder = encoder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._encoder, name)

    def finish(self) -> bytes:
        raise RuntimeError("injected fault: the encoder could not finish")
