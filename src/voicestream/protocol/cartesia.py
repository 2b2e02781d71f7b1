"""Cartesia's speech API messages, as pydantic models: what ``WS /tts/websocket``,
``POST /tts/bytes`` and ``POST /tts/sse`` take, and what the socket and the events answer.

The shapes follow what pipecat's ``CartesiaTTSService`` and LiveKit's ``cartesia.TTS`` send
and read (their installed source, where it differs from Cartesia's documentation): see
``voicestream.server.faces.cartesia``. Inbound validation is strict in the protocol's way (a
number is never a string, ``true`` is never 1, ``null`` is an absent field) and every
problem becomes a :class:`ProtocolError` addressed to the message's ``context_id``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, ValidationError, model_validator
from pydantic_core import ErrorDetails

from voicestream.catalog import voice_language
from voicestream.protocol.errors import ErrorCode, ProtocolError
from voicestream.protocol.messages import (
    DEFAULT_SAMPLE_RATE,
    DEFAULT_VOICE,
    SAMPLE_RATES,
    InboundMessage,
    SampleRate,
    WireModel,
)

RAW_ENCODINGS: Mapping[str, str | None] = {"pcm_s16le": "pcm16", "pcm_mulaw": "mulaw", "pcm_f32le": None}
"""Cartesia's raw encodings and the session protocol's format of each (``pcm_f32le`` has
none: the server encodes it itself)."""
Container = Literal["raw", "wav", "mp3"]
SOCKET_CONTAINERS: tuple[str, ...] = ("raw",)
"""The WebSocket sends raw audio only."""
BYTES_CONTAINERS: tuple[str, ...] = ("raw", "wav", "mp3")
"""``/tts/bytes`` containers."""
DEFAULT_BUFFER_DELAY_MS = 3000
MAX_BUFFER_DELAY_MS = 5000

_Bool = Annotated[bool, Field(strict=True)]
_Str = Annotated[str, Field(strict=True)]


class _Part(InboundMessage):
    """A nested object of a Cartesia message (``null`` fields count as absent)."""


class CartesiaVoice(_Part):
    mode: _Str = "id"
    id: _Str = DEFAULT_VOICE


class GenerationConfig(_Part):
    speed: Annotated[float, Field(strict=True)] = 1.0


class CartesiaOutputFormat(_Part):
    container: _Str = "raw"
    encoding: _Str = "pcm_s16le"
    sample_rate: SampleRate = DEFAULT_SAMPLE_RATE
    bit_rate: Annotated[int, Field(strict=True, gt=0)] | None = None


def _shape_problem(name: str) -> tuple[ErrorCode, str]:
    return ErrorCode.INVALID_MESSAGE, f"{name} must be a {'bool' if name in _BOOLEANS else 'str'}"


_BOOLEANS = frozenset({"continue", "flush", "add_timestamps", "cancel"})
_PROBLEMS: Mapping[str, tuple[ErrorCode, str]] = {
    "voice": (ErrorCode.UNKNOWN_VOICE, 'voice must be a Kokoro voice or blend, or {"mode": "id", "id": one}'),
    "generation_config": (ErrorCode.INVALID_SPEED, "generation_config.speed must be a number"),
    "output_format.sample_rate": (
        ErrorCode.UNSUPPORTED_SAMPLE_RATE,
        f"output_format.sample_rate must be {', '.join(map(str, SAMPLE_RATES))} (Hz)",
    ),
    "output_format.bit_rate": (
        ErrorCode.UNSUPPORTED_FORMAT, "output_format.bit_rate must be a positive number of bits per second",
    ),
    "max_buffer_delay_ms": (
        ErrorCode.INVALID_MESSAGE, f"max_buffer_delay_ms must be 0 to {MAX_BUFFER_DELAY_MS}",
    ),
    **{name: _shape_problem(name) for name in ("transcript", "language", "model_id", "pronunciation_dict_id", *_BOOLEANS)},
}


class CartesiaGeneration(InboundMessage):
    """One generation request: ``/tts/bytes``, or one message of a WebSocket context."""

    field_problems: ClassVar[Mapping[str, tuple[ErrorCode, str]]] = _PROBLEMS

    context_id: str | None = None
    """Any non-empty string; anything else counts as no context (the socket then refuses it)."""
    transcript: _Str = ""
    voice: CartesiaVoice = CartesiaVoice()
    generation_config: GenerationConfig = GenerationConfig()
    language: _Str = ""
    output_format: CartesiaOutputFormat = CartesiaOutputFormat()
    continue_: _Bool = Field(False, alias="continue")
    max_buffer_delay_ms: Annotated[int, Field(strict=True, ge=0, le=MAX_BUFFER_DELAY_MS)] = DEFAULT_BUFFER_DELAY_MS
    flush: _Bool = False
    add_timestamps: _Bool = False
    pronunciation_dict_id: Annotated[str, Field(strict=True, min_length=1, max_length=64)] | None = None
    """A pronunciation dictionary uploaded to ``/pronunciation-dicts/``, applied to the transcript."""

    @model_validator(mode="before")
    @classmethod
    def _usable_context_id(cls, data: Any) -> Any:
        """A context id that is no non-empty string counts as none; a voice given as a bare
        id (what the official SDK sends) is the id form."""
        if isinstance(data, dict):
            context_id, voice = data.get("context_id"), data.get("voice")
            data = {**data, "context_id": context_id if isinstance(context_id, str) and context_id else None}
            return {**data, "voice": {"mode": "id", "id": voice}} if isinstance(voice, str) else data
        return data

    @classmethod
    def describe_problem(cls, error: ErrorDetails) -> tuple[ErrorCode, str]:
        loc = [str(part) for part in error["loc"]]
        if len(loc) == 1 and error["type"] == "model_type":
            return ErrorCode.INVALID_MESSAGE, f"{loc[0]} must be an object"
        for depth in (2, 1):
            problem = cls.field_problems.get(".".join(loc[:depth]))
            if problem is not None:
                return problem
        return ErrorCode.INVALID_MESSAGE, "the message does not follow Cartesia's generation request"

    @property
    def voice_id(self) -> str:
        return self.voice.id or DEFAULT_VOICE

    @property
    def speed(self) -> float:
        return self.generation_config.speed

    @property
    def language_override(self) -> str | None:
        """The request's language where it differs from the voice's own ("en" with a
        British voice keeps the voice's own English)."""
        language = self.language or None
        if language is not None and language.split("-")[0].lower() == voice_language(self.voice_id).split("-")[0]:
            return None
        return language


def parse_generation(message: Mapping[str, Any], containers: tuple[str, ...] = SOCKET_CONTAINERS) -> CartesiaGeneration:
    """One generation request; raises :class:`ProtocolError` addressed to its context."""
    context_id = message.get("context_id")
    context_id = context_id if isinstance(context_id, str) and context_id else None
    try:
        request = CartesiaGeneration.model_validate(dict(message))
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_context=False, include_input=False)[0]
        code, text = CartesiaGeneration.describe_problem(first)
        raise ProtocolError(code, text, context_id) from None
    if request.voice.mode != "id":
        raise ProtocolError(*_PROBLEMS["voice"], context_id)
    fmt = request.output_format
    if fmt.container not in containers:
        raise ProtocolError(ErrorCode.UNSUPPORTED_FORMAT, f"output_format.container must be {' or '.join(containers)}", context_id)
    if (fmt.container == "raw" and fmt.encoding not in RAW_ENCODINGS) or (fmt.container == "wav" and fmt.encoding != "pcm_s16le"):
        allowed = ", ".join(RAW_ENCODINGS) if fmt.container == "raw" else "pcm_s16le"
        raise ProtocolError(ErrorCode.UNSUPPORTED_FORMAT, f"output_format.encoding must be {allowed}", context_id)
    return request


# --- what the socket answers ---------------------------------------------------------------


class CartesiaAnswer(WireModel):
    """Every answer carries ``context_id`` (pipecat indexes it) and a ``status_code``."""

    type: str
    context_id: str | None
    status_code: int

    def to_json(self) -> str:
        """``context_id`` stays in the JSON even when null (an error for no context)."""
        return self.model_dump_json(exclude_none=True, by_alias=True) if self.context_id else self.model_dump_json(by_alias=True)


class CartesiaChunk(CartesiaAnswer):
    type: Literal["chunk"] = "chunk"
    data: str
    """Base64 audio."""
    done: bool = False
    status_code: int = 206
    step_time: float


class CartesiaWordTimestamps(WireModel):
    words: list[str]
    start: list[float]
    end: list[float]


class CartesiaTimestamps(CartesiaAnswer):
    type: Literal["timestamps"] = "timestamps"
    done: bool = False
    status_code: int = 206
    word_timestamps: CartesiaWordTimestamps


class CartesiaFlushDone(CartesiaAnswer):
    type: Literal["flush_done"] = "flush_done"
    done: bool = False
    flush_done: bool = True
    flush_id: int
    status_code: int = 206


class CartesiaDone(CartesiaAnswer):
    type: Literal["done"] = "done"
    done: bool = True
    status_code: int = 200


class CartesiaStreamError(CartesiaAnswer):
    """``/tts/sse``'s error event, in the shape the official SDK reads (``title``, ``message``)."""

    type: Literal["error"] = "error"
    done: bool = True
    title: str
    message: str
    error_code: str
    request_id: str


class CartesiaError(CartesiaAnswer):
    """No ``done`` field: LiveKit raises an error rather than take it for the end."""

    type: Literal["error"] = "error"
    code: str
    error: str
