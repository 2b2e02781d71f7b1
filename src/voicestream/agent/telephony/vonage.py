"""Vonage's WebSocket connection (an NCCO ``connect`` to a ``websocket`` endpoint): the
answer URL's NCCO and the stream's protocol machine.

Audio both ways is binary: 16-bit linear PCM at 16 kHz, 20 ms (640 bytes) a frame. Text
frames are JSON control: in, ``websocket:connected`` (with the ``content-type``),
``websocket:notify`` (a ``notify`` action's audio has played: its payload comes back),
``websocket:cleared`` and ``websocket:dtmf``; out, the actions ``notify`` and ``clear``. The
call ends when Vonage closes the socket.
"""

from __future__ import annotations

from typing import Any

from voicestream.agent.telephony.machine import CarrierMachine, compact, field, parse_json, text
from voicestream.protocol.telephony import (
    Audio,
    CarrierError,
    Codec,
    Command,
    Digits,
    Played,
    Started,
    StreamState,
)

RATE = 16000
FRAME_BYTES = RATE * 2 // 50
"""20 ms of 16-bit audio at 16 kHz: the only frame size Vonage takes."""
CONTENT_TYPE = f"audio/l16;rate={RATE}"


def ncco(stream_url: str) -> list[dict[str, Any]]:
    """The answer URL's NCCO: connect the call to the agent's WebSocket."""
    endpoint = {"type": "websocket", "uri": stream_url, "content-type": CONTENT_TYPE}
    return [{"action": "connect", "endpoint": [endpoint]}]


class VonageStream(CarrierMachine):
    carrier = "Vonage"
    frame_bytes = FRAME_BYTES

    def __init__(self) -> None:
        super().__init__()
        self.codec, self.rate = Codec.L16, RATE

    def receive(self, message: str | bytes) -> list[Command]:
        if isinstance(message, bytes):
            self.streaming("audio")
            return [Audio(message)]
        event = parse_json(message, self.carrier)
        kind = event.get("event")
        if kind == "websocket:connected":
            self.move(StreamState.STREAMING)
            content_type = str(event.get("content-type") or CONTENT_TYPE)
            if not content_type.startswith("audio/l16"):
                raise CarrierError(f"a Vonage stream in {content_type!r}, not audio/l16")
            rate = int(content_type.partition("rate=")[2] or RATE)
            return [Started(str(event.get("uuid") or "vonage"), Codec.L16, rate)]
        if kind == "websocket:notify":
            return [Played(text(field(event, "payload", "name"), "a notify name", self.carrier))]
        if kind == "websocket:dtmf":
            digit = event.get("digit") or field(event, "dtmf", "digit") or field(event, "dtmf", "digits")
            return [Digits(text(str(digit) if digit is not None else None, "a digit", self.carrier))]
        if not isinstance(kind, str):
            raise CarrierError("a Vonage frame without an event")
        return []

    def media(self, audio: bytes) -> bytes:
        return audio

    def mark(self, name: str) -> str:
        return compact({"action": "notify", "payload": {"name": name}})

    def clear(self) -> str:
        return compact({"action": "clear"})
