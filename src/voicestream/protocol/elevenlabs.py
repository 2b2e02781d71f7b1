"""ElevenLabs' speech API messages, as pydantic models, and its character alignment.

What ``WS /v1/text-to-speech/{voice_id}/multi-stream-input`` and ``/stream-input`` take and
answer, and what the ``POST /v1/text-to-speech/{voice_id}`` routes take and answer with
timestamps: the shapes pipecat's ``ElevenLabsTTSService`` / ``ElevenLabsHttpTTSService`` and
LiveKit's ``elevenlabs.TTS`` send and read (see ``voicestream.server.faces.elevenlabs``). Inbound
validation is strict (a number is never a string, ``true`` is never 1, ``null`` is an absent
field); every problem becomes a :class:`ProtocolError`.

ElevenLabs times characters, the engine times words: :func:`char_alignment` derives the one
from the other, each word's span shared evenly over its characters, a space between words
holding the gap between them, so that an answer's characters cover its audio exactly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Annotated, Any, ClassVar, Literal, Protocol

from pydantic import ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from voicestream.catalog import voice_language
from voicestream.protocol.errors import ErrorCode, ProtocolError
from voicestream.protocol.messages import SAMPLE_RATES, InboundMessage, WireModel

DEFAULT_OUTPUT_FORMAT = "mp3_44100_128"
"""ElevenLabs' default ``output_format``."""
CODECS: Mapping[str, str] = {"pcm": "pcm16", "ulaw": "mulaw", "wav": "wav", "mp3": "mp3", "opus": "opus"}
"""ElevenLabs' codec names and the encoder of each (``alaw`` has none here)."""
_LOSSY = frozenset({"mp3", "opus"})
_FORMAT = re.compile(r"(?P<codec>[a-z][a-z0-9]*)_(?P<rate>\d+)(?:_(?P<kbps>\d+))?")

_Bool = Annotated[bool, Field(strict=True)]
_Str = Annotated[str, Field(strict=True)]
_Number = Annotated[float, Field(strict=True)]


@dataclass(frozen=True)
class OutputFormat:
    """An ``output_format`` name as the encoder it asks for."""

    name: str
    format: str
    """The core's format name (`voicestream.audio.create_encoder`)."""
    sample_rate: int
    bit_rate: int | None = None
    """Bits per second of a lossy codec (mp3, opus); None: the encoder's default."""


def parse_output_format(name: str) -> OutputFormat:
    """``pcm_24000``, ``ulaw_8000``, ``mp3_44100_128``, ``opus_48000_64``, ``wav_16000``...;
    anything else is ``unsupported_format`` (a rate this server lacks, ``unsupported_sample_rate``)."""
    match = _FORMAT.fullmatch(name)
    codec = match and CODECS.get(match["codec"])
    if match is None or codec is None or (match["kbps"] and codec not in _LOSSY):
        supported = "pcm_RATE, ulaw_8000, wav_RATE, mp3_RATE_KBPS or opus_48000_KBPS"
        raise ProtocolError(ErrorCode.UNSUPPORTED_FORMAT, f"output_format {name!r} is not supported; use {supported}")
    rate = int(match["rate"])
    if rate not in SAMPLE_RATES or (codec == "mulaw" and rate != 8000):
        rates = "8000" if codec == "mulaw" else ", ".join(map(str, SAMPLE_RATES))
        raise ProtocolError(ErrorCode.UNSUPPORTED_SAMPLE_RATE, f"output_format {name!r}: the rate must be {rates} (Hz)")
    kbps = int(match["kbps"]) if match["kbps"] else None
    if kbps is not None and not 8 <= kbps <= 320:
        raise ProtocolError(ErrorCode.UNSUPPORTED_FORMAT, f"output_format {name!r}: the bit rate must be 8 to 320 kbps")
    return OutputFormat(name, codec, rate, kbps * 1000 if kbps else None)


def spoken_language(language_code: str | None, voice: str) -> str | None:
    """``language_code`` where it differs from the voice's own language (``en`` with a British
    voice keeps the voice's English); None leaves the voice's."""
    if not language_code or language_code.split("-")[0].lower() == voice_language(voice).split("-")[0]:
        return None
    return language_code


# --- character alignment ---------------------------------------------------------------------


@dataclass(frozen=True)
class CharTimes:
    """Characters and their times in whole milliseconds from the start of one span of audio."""

    chars: tuple[str, ...]
    starts_ms: tuple[int, ...]
    durations_ms: tuple[int, ...]


class SpokenWord(Protocol):
    """A word and when it is spoken: the protocol's `WordTiming`, or the engine's words as the
    server hands them to a face."""

    @property
    def word(self) -> str: ...
    @property
    def start_s(self) -> float: ...
    @property
    def end_s(self) -> float: ...


def char_alignment(words: Sequence[SpokenWord], start_s: float, end_s: float) -> CharTimes:
    """The characters of ``words`` (timed in seconds on any clock) spoken within the audio
    from ``start_s`` to ``end_s`` of that clock, timed from ``start_s``.

    Each word's span (clipped to the audio, never before the previous word's end) is shared
    evenly over its characters; one space between words holds the gap between them; a space
    before the first word fills the audio before it, and one after the last word (always there,
    if only for no time: the last word is complete, and a client joining answers never glues it
    to the next answer's first) fills the audio after it, so the last character ends where the
    audio ends (clients that advance their clock by an answer's last character, as pipecat does,
    stay on the audio's clock). Durations are whole milliseconds that add up exactly."""
    total = max(0, round((end_s - start_s) * 1000))
    chars: list[str] = []
    bounds: list[int] = [0]
    """Where each character starts, then where the last one ends."""

    def add(text: str, until: int) -> None:
        begin = bounds[-1]
        chars.extend(text)
        bounds.extend(begin + round((until - begin) * (k + 1) / len(text)) for k in range(len(text)))

    for index, word in enumerate(w for w in words if w.word):
        begin = min(max(round((word.start_s - start_s) * 1000), bounds[-1]), total)
        if index or begin > 0:
            add(" ", begin)
        add(word.word, min(max(round((word.end_s - start_s) * 1000), bounds[-1]), total))
    if chars:
        add(" ", total)
    return CharTimes(
        tuple(chars), tuple(bounds[:-1]), tuple(end - begin for begin, end in pairwise(bounds))
    )


# --- what clients send --------------------------------------------------------------------------


class VoiceSettings(InboundMessage):
    """Only ``speed`` is used; stability, similarity_boost, style and use_speaker_boost are
    accepted and ignored (Kokoro has no such controls)."""

    speed: _Number = 1.0


class DictionaryLocator(InboundMessage):
    """A pronunciation dictionary a request names (``version_id`` accepted; a dictionary here
    has one version)."""

    pronunciation_dictionary_id: Annotated[str, Field(strict=True, min_length=1, max_length=64)]
    version_id: _Str | None = None


_Locators = Annotated[list[DictionaryLocator], Field(max_length=3)]
"""ElevenLabs takes at most three dictionaries a request."""

_PROBLEMS: Mapping[str, tuple[ErrorCode, str]] = {
    "voice_settings": (ErrorCode.INVALID_SPEED, "voice_settings must be an object whose speed is a number"),
    "text": (ErrorCode.INVALID_MESSAGE, "text must be a string"),
    "context_id": (ErrorCode.INVALID_MESSAGE, "context_id must be a non-empty string"),
    "language_code": (ErrorCode.INVALID_MESSAGE, "language_code must be a string"),
    "model_id": (ErrorCode.INVALID_MESSAGE, "model_id must be a string"),
    "pronunciation_dictionary_locators": (
        ErrorCode.INVALID_MESSAGE,
        "pronunciation_dictionary_locators must be a list of at most 3 {pronunciation_dictionary_id, version_id}",
    ),
    **{name: (ErrorCode.INVALID_MESSAGE, f"{name} must be a bool")
       for name in ("flush", "close_context", "close_socket", "try_trigger_generation")},
}


class _Inbound(InboundMessage):
    field_problems: ClassVar[Mapping[str, tuple[ErrorCode, str]]] = _PROBLEMS

    @classmethod
    def describe_problem(cls, error: ErrorDetails) -> tuple[ErrorCode, str]:
        field = str(error["loc"][0]) if error["loc"] else ""
        return cls.field_problems.get(field, (ErrorCode.INVALID_MESSAGE, "the message does not follow ElevenLabs' API"))

    @classmethod
    def parse(cls, message: Mapping[str, Any], context_id: str | None = None) -> Any:
        try:
            return cls.model_validate(dict(message))
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_context=False, include_input=False)[0]
            raise ProtocolError(*cls.describe_problem(first), context_id) from None


class SocketMessage(_Inbound):
    """One message of either socket: text (``" "`` opens a context, ``""`` is a keep-alive on
    ``multi-stream-input`` and the end on ``stream-input``), a flush, a close; the message that
    opens a context may name pronunciation dictionaries. ``generation_config`` and
    ``try_trigger_generation`` are accepted and ignored."""

    text: _Str | None = None
    context_id: Annotated[str, Field(strict=True, min_length=1)] | None = None
    voice_settings: VoiceSettings | None = None
    flush: _Bool = False
    close_context: _Bool = False
    close_socket: _Bool = False
    try_trigger_generation: _Bool = False
    pronunciation_dictionary_locators: _Locators = Field(default_factory=list)

    @property
    def speed(self) -> float:
        return self.voice_settings.speed if self.voice_settings is not None else 1.0

    @property
    def dictionaries(self) -> tuple[str, ...]:
        return tuple(locator.pronunciation_dictionary_id for locator in self.pronunciation_dictionary_locators)


class SpeechRequest(_Inbound):
    """The body of ``POST /v1/text-to-speech/{voice_id}`` (and its variants); ``model_id``,
    ``previous_text``, ``next_text``, ``seed`` and the normalization switches are accepted and
    ignored."""

    text: _Str
    model_id: _Str = ""
    voice_settings: VoiceSettings = VoiceSettings()
    language_code: _Str | None = None
    pronunciation_dictionary_locators: _Locators = Field(default_factory=list)

    @property
    def dictionaries(self) -> tuple[str, ...]:
        return tuple(locator.pronunciation_dictionary_id for locator in self.pronunciation_dictionary_locators)

    @classmethod
    def describe_problem(cls, error: ErrorDetails) -> tuple[ErrorCode, str]:
        if error["loc"] == ("text",) and error["type"] == "missing":
            return ErrorCode.TEXT_REQUIRED, "text is required and must not be blank"
        return super().describe_problem(error)


def parse_socket_message(message: Mapping[str, Any]) -> SocketMessage:
    context_id = message.get("context_id")
    parsed: SocketMessage = SocketMessage.parse(message, context_id if isinstance(context_id, str) else None)
    return parsed


def parse_speech_request(message: Mapping[str, Any]) -> SpeechRequest:
    request: SpeechRequest = SpeechRequest.parse(message)
    if not request.text.strip():
        raise ProtocolError(ErrorCode.TEXT_REQUIRED, "text is required and must not be blank")
    return request


# --- what the sockets answer ---------------------------------------------------------------------


class _Camel(WireModel):
    """ElevenLabs' socket JSON is camelCase (``contextId``, ``isFinal``, ``charStartTimesMs``)."""

    model_config = ConfigDict(extra="ignore", frozen=True, alias_generator=to_camel, populate_by_name=True)

    def to_json(self) -> str:
        return self.model_dump_json(exclude_none=True, by_alias=True)


class _SocketAnswer(_Camel):
    """``contextId`` is left out on ``stream-input``, which has one context."""

    context_id: str | None = None


class SocketAlignment(_Camel):
    chars: list[str]
    char_start_times_ms: list[int]
    char_durations_ms: list[int]

    @classmethod
    def of(cls, times: CharTimes) -> SocketAlignment:
        return cls(chars=list(times.chars), char_start_times_ms=list(times.starts_ms),
                   char_durations_ms=list(times.durations_ms))


class AudioAnswer(_SocketAnswer):
    """Base64 audio with the characters it speaks, timed from the start of this answer's audio
    (the same in ``alignment`` and ``normalizedAlignment``: the words as written)."""

    audio: str
    alignment: SocketAlignment | None = None
    normalized_alignment: SocketAlignment | None = None


class FinalAnswer(_SocketAnswer):
    is_final: Literal[True] = True


class ErrorAnswer(_SocketAnswer):
    """``error`` (the code) is what LiveKit reads; ``message`` says why."""

    error: str
    message: str


# --- what the HTTP routes answer with timestamps ----------------------------------------------------


class HttpAlignment(WireModel):
    characters: list[str]
    character_start_times_seconds: list[float]
    character_end_times_seconds: list[float]

    @classmethod
    def of(cls, times: CharTimes, offset_s: float = 0.0) -> HttpAlignment:
        """``times`` in seconds, ``offset_s`` later (a streamed chunk's times count from the request's start)."""
        starts = [round(offset_s + ms / 1000, 3) for ms in times.starts_ms]
        ends = [round(offset_s + (ms + d) / 1000, 3) for ms, d in zip(times.starts_ms, times.durations_ms, strict=True)]
        return cls(characters=list(times.chars), character_start_times_seconds=starts, character_end_times_seconds=ends)


class TimedAudio(WireModel):
    """``/with-timestamps``: the whole answer; ``/stream/with-timestamps``: one line per chunk."""

    audio_base64: str
    alignment: HttpAlignment | None = None
    normalized_alignment: HttpAlignment | None = None
