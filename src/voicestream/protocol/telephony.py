"""What a phone carrier's media stream says to the agent, whatever the carrier: the commands
each carrier's protocol machine (`voicestream.agent.telephony`) reads out of its frames.

A machine turns one frame into a list of these; the call (`agent.telephony.call`) acts on
them. The audio's codec and rate come with `Started`, as each carrier announces them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

MAX_FRAME_BYTES = 1 << 20
"""A carrier's frame is a few hundred bytes (20 ms of audio); a larger one than this closes
the stream."""


class Codec(Enum):
    MULAW = "mulaw"
    """G.711 mu-law (PCMU)."""
    ALAW = "alaw"
    """G.711 A-law (PCMA)."""
    L16 = "l16"
    """16-bit linear PCM, little-endian."""


class StreamState(Enum):
    """A media stream's life: audio flows only between `start` and `stop`."""

    CONNECTING = "connecting"
    STREAMING = "streaming"
    STOPPED = "stopped"


class CarrierError(Exception):
    """A frame the carrier's protocol does not allow (not JSON, an unknown shape, media
    before the stream started): the stream is closed, with this as the logged reason."""


@dataclass(frozen=True, slots=True)
class Started:
    """The stream began: the call's id at the carrier, and the caller's audio format."""

    call_id: str
    codec: Codec
    rate: int


@dataclass(frozen=True, slots=True)
class Audio:
    """The caller's audio (decoded from the frame's base64 where the carrier uses it)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Played:
    """The carrier has played the audio sent before the mark (checkpoint) of this name."""

    name: str


@dataclass(frozen=True, slots=True)
class Digits:
    """The caller pressed keys (DTMF)."""

    digits: str


@dataclass(frozen=True, slots=True)
class HungUp:
    """The call ended (the carrier's `stop`)."""


Command = Started | Audio | Played | Digits | HungUp
