"""What every carrier's media-stream machine shares: its state, JSON parsing and the shape
the call drives (`CarrierMachine`). A machine does no I/O: it reads a frame into commands
(`voicestream.protocol.telephony`) and formats the frames the call sends back."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, ClassVar

from voicestream.protocol.telephony import (
    Audio,
    CarrierError,
    Codec,
    Command,
    Digits,
    HungUp,
    Played,
    Started,
    StreamState,
)

_NEXT_STATES = {
    StreamState.CONNECTING: {StreamState.STREAMING, StreamState.STOPPED},
    StreamState.STREAMING: {StreamState.STOPPED},
    StreamState.STOPPED: set(),
}


class CarrierMachine:
    """One media stream's protocol state. Subclasses set `carrier` and the output format
    (`codec`, `rate`, once `Started`), and implement `receive`, `media`, `mark`, `clear`."""

    carrier: ClassVar[str]
    frame_bytes: ClassVar[int | None] = None
    """Where the carrier takes audio only in frames of this many bytes (Vonage), else None."""

    def __init__(self) -> None:
        self.state = StreamState.CONNECTING
        self.codec = Codec.MULAW
        self.rate = 8000

    def receive(self, message: str | bytes) -> list[Command]:
        raise NotImplementedError

    def media(self, audio: bytes) -> str | bytes:
        """A frame carrying `audio` (in `codec` at `rate`) to the caller."""
        raise NotImplementedError

    def mark(self, name: str) -> str:
        """A frame asking the carrier to say `name` back once what was sent before it has played."""
        raise NotImplementedError

    def clear(self) -> str:
        """A frame asking the carrier to drop the audio it has not played yet."""
        raise NotImplementedError

    def move(self, to: StreamState) -> None:
        """The one place the state changes; an illegal transition is the carrier's fault."""
        if to not in _NEXT_STATES[self.state]:
            raise CarrierError(f"a {self.carrier} stream cannot go from {self.state.value} to {to.value}")
        self.state = to

    def streaming(self, what: str) -> None:
        if self.state is not StreamState.STREAMING:
            raise CarrierError(f"{what} on a {self.carrier} stream that is {self.state.value}")

    def stopped(self) -> list[Command]:
        if self.state is StreamState.STOPPED:
            return []
        self.move(StreamState.STOPPED)
        return [HungUp()]


class JsonStream(CarrierMachine):
    """A carrier whose frames are all JSON text with an ``event`` (Twilio's shape, which
    Telnyx and Plivo follow): ``start``, ``media`` (base64 ``media.payload``, the inbound
    track), a played mark (`played_event`, its name where `played_name` says), ``dtmf``
    (``dtmf.digit``) and ``stop``; other events are ignored, as the carriers add some."""

    played_event: ClassVar[str] = "mark"

    def receive(self, message: str | bytes) -> list[Command]:
        if isinstance(message, bytes):
            raise CarrierError(f"a binary {self.carrier} frame ({self.carrier} sends JSON text)")
        event = parse_json(message, self.carrier)
        kind = event.get("event")
        if not isinstance(kind, str):
            raise CarrierError(f"a {self.carrier} frame without an event")
        if kind == "start":
            self.move(StreamState.STREAMING)
            return [self.started(event)]
        if kind == "media":
            self.streaming("media")
            if field(event, "media", "track") not in (None, "inbound"):
                return []
            return [Audio(payload(field(event, "media", "payload"), self.carrier))]
        if kind == self.played_event:
            return [Played(text(self.played_name(event), "a mark name", self.carrier))]
        if kind == "dtmf":
            return [Digits(text(field(event, "dtmf", "digit"), "a digit", self.carrier))]
        if kind == "stop":
            return self.stopped()
        return []

    def started(self, event: dict[str, Any]) -> Started:
        """The ``start`` event's call id and audio format (and the ids the frames out carry)."""
        raise NotImplementedError

    def played_name(self, event: dict[str, Any]) -> Any:
        return field(event, "mark", "name")

    def encoding(self, name: str, encodings: dict[str, Codec]) -> Codec:
        if name not in encodings:
            raise CarrierError(f"a {self.carrier} stream in {name!r}, not {' or '.join(encodings)}")
        return encodings[name]


def parse_json(message: str | bytes, carrier: str) -> dict[str, Any]:
    """A text frame's JSON object; anything else is a `CarrierError`."""
    try:
        value = json.loads(message)
    except (ValueError, UnicodeDecodeError):
        raise CarrierError(f"a {carrier} frame that is not JSON") from None
    if not isinstance(value, dict):
        raise CarrierError(f"a {carrier} frame that is not a JSON object")
    return value


def field(value: Any, *path: str) -> Any:
    """`value[path[0]][path[1]]...`, or None where a step is missing or not an object."""
    for name in path:
        if not isinstance(value, dict):
            return None
        value = value.get(name)
    return value


def text(value: Any, what: str, carrier: str) -> str:
    if not isinstance(value, str) or not value:
        raise CarrierError(f"a {carrier} frame without {what}")
    return value


def payload(value: Any, carrier: str) -> bytes:
    try:
        return base64.b64decode(text(value, "a media payload", carrier), validate=True)
    except (binascii.Error, ValueError):
        raise CarrierError(f"a {carrier} media payload that is not base64") from None


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def compact(frame: dict[str, Any]) -> str:
    return json.dumps(frame, separators=(",", ":"))
