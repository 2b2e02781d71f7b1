"""Telling control frames from audio in a byte stream that carries both (PROTOCOL.md 1.3)."""

from __future__ import annotations

from typing import Any

from voicestream.protocol._json import loads_strict

_JSON_WHITESPACE = b" \t\n\r"


def decode_control_frame(chunk: bytes | bytearray | memoryview) -> dict[str, Any] | None:
    """The control message a chunk carries, or None when the chunk is audio.

    A chunk is a control frame if and only if the whole chunk is UTF-8 text of one JSON
    object. PCM that happens to start with `{` stays audio unless all of it is such text.
    Audio chunks are large and a control frame is an object, so a chunk whose first and last
    non-blank bytes are not `{` and `}` is rejected before any decoding.
    """
    if not isinstance(chunk, bytes):
        chunk = bytes(chunk)
    body = chunk.strip(_JSON_WHITESPACE)
    if body[:1] != b"{" or body[-1:] != b"}":
        return None
    try:
        value: dict[str, Any] = loads_strict(body.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return value
