"""What a speech session reports, one typed event per thing that happened, in arrival order.

`index` is the request's place in the order of submission on its session (0 for the first
sentence), so a caller that speaks sentence by sentence can tell which sentence is playing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from voicestream.client.errors import SpeechError
from voicestream.protocol import WordTiming


@dataclass(frozen=True, slots=True)
class SpeechStarted:
    """The server began answering the request; its audio follows in `format`."""

    request_id: str
    index: int
    text: str
    format: str
    sample_rate: int


@dataclass(frozen=True, slots=True)
class AudioChunk:
    """A piece of the request's audio, to be played or stored in order."""

    request_id: str
    index: int
    data: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class WordTimes:
    """When the words of the audio that follows are spoken (a request that asked for word
    timestamps): seconds from the start of the request's audio, as the user wrote them."""

    request_id: str
    index: int
    words: tuple[WordTiming, ...]


@dataclass(frozen=True, slots=True)
class SpeechCompleted:
    """All of the request's audio has arrived.

    `audio_bytes`, `total_duration_s` and `elapsed_s` are the server's figures;
    `first_audio_ms` is measured here, from `submit` to the first audio byte, so it counts
    the network and the queue as a listener hears them (None when there was no audio).
    """

    request_id: str
    index: int
    audio_bytes: int
    total_duration_s: float
    elapsed_s: float
    first_audio_ms: float | None


@dataclass(frozen=True, slots=True)
class SpeechCancelled:
    """The request was cancelled; any of its audio still in flight was dropped."""

    request_id: str
    index: int


@dataclass(frozen=True, slots=True)
class SpeechFailed:
    """The request failed with `error`; the session goes on with the next one.

    `request_id` and `index` are None for an error the server addressed to no request of
    this session (a `busy` refusal of the session itself, say).
    """

    request_id: str | None
    index: int | None
    error: SpeechError


SpeechEvent = SpeechStarted | AudioChunk | WordTimes | SpeechCompleted | SpeechCancelled | SpeechFailed
