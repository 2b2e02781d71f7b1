"""The OpenAI Realtime API's messages (GA event names), as pydantic models: what the agent's
``WS /v1/realtime`` (and AgentCore's ``WS /ws``) takes and sends.

The shapes follow the ``openai`` SDK's own types (``openai.types.realtime``), which the tests
validate every server event against; the clients that speak it (the SDK's
``realtime.connect()``, pipecat's ``OpenAIRealtimeLLMService``, LiveKit's
``openai.realtime.RealtimeModel``) send the same client events. Parsing is lenient where the
protocol is (unknown fields ignored, ``null`` for absent), strict where it matters (types,
ranges), and what the agent does not do (tools, MCP, images) is refused by name with
:class:`RealtimeError` rather than silently ignored.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from voicestream.protocol.messages import DEFAULT_VOICE, MAX_SPEED, MIN_SPEED, OPENAI_VOICE_MAP

INPUT_RATE = 24000
"""``audio/pcm`` is 16-bit mono at 24 kHz both ways; ``audio/pcmu`` and ``audio/pcma`` are
G.711 at 8 kHz."""
G711_RATE = 8000
REALTIME_VOICES: Mapping[str, str] = {**OPENAI_VOICE_MAP, "marin": "af_heart", "cedar": "am_fenrir"}
"""OpenAI's Realtime voices (those of ``/v1/audio/speech`` and the two Realtime-only ones) to
the nearest Kokoro voice; any other name is taken as a Kokoro voice."""


def new_id(prefix: str) -> str:
    """An id of the kind OpenAI's server makes (``item_...``, ``resp_...``, ``event_...``)."""
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


class RealtimeError(Exception):
    """A client event the agent cannot act on: answered with one ``error`` event, the socket
    stays open. ``param`` names the field at fault, ``event_id`` the client's event."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "invalid_value",
        param: str | None = None,
        event_id: str | None = None,
        type: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.param = param
        self.event_id = event_id
        self.type = type


def unsupported(what: str, param: str, event_id: str | None = None) -> RealtimeError:
    return RealtimeError(
        f"{what} is not supported by this server",
        code="unsupported",
        param=param,
        event_id=event_id,
    )


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


# --- the session ---------------------------------------------------------------------------


class AudioFormat(_Model):
    type: Literal["audio/pcm", "audio/pcmu", "audio/pcma"] = "audio/pcm"
    rate: Literal[24000] | None = None

    @property
    def sample_rate(self) -> int:
        return INPUT_RATE if self.type == "audio/pcm" else G711_RATE

    def wire(self) -> dict[str, Any]:
        return (
            {"type": self.type, "rate": INPUT_RATE}
            if self.type == "audio/pcm"
            else {"type": self.type}
        )


class ServerVad(_Model):
    """Turn detection on the server: Silero VAD's speech probability against `threshold`;
    a turn ends after `silence_duration_ms` below it, and keeps `prefix_padding_ms` of audio
    from before it started."""

    type: Literal["server_vad"] = "server_vad"
    threshold: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5
    prefix_padding_ms: Annotated[int, Field(ge=0, le=5000)] = 300
    silence_duration_ms: Annotated[int, Field(ge=0, le=10000)] = 500
    create_response: bool = True
    interrupt_response: bool = True


EAGERNESS_MAX_PAUSE_MS: Mapping[str, int] = {"low": 8000, "medium": 4000, "high": 2000, "auto": 4000}
"""How long a turn that sounds unfinished may pause before it ends anyway, by `eagerness`, as
OpenAI documents ``semantic_vad`` (``auto`` is ``medium``)."""
EAGERNESS_CONFIRM_MS: Mapping[str, int] = {"low": 1500, "medium": 1000, "high": 400, "auto": 1000}
"""How long the silence after a turn judged finished lasts before the turn ends, by
`eagerness`: a speaker who only paused (600 to 900 ms, to find a word) goes on within it. Its
answer is prepared meanwhile and sent when the turn ends (or dropped unheard when the speaker
goes on), so where an answer takes longer than this to prepare the wait costs nothing."""
EAGERNESS_SURE_MS: Mapping[str, int] = {"low": 800, "medium": 300, "high": 200, "auto": 300}
"""The same where the audio and the words both say the turn is finished (a sure verdict):
a hesitation after a word that leaves the sentence open is not judged so by the words."""


class SemanticVad(_Model):
    """Turn detection that asks whether the turn is finished: at each pause in the speech an
    end-of-turn model (the audio) and the words heard so far judge it; a finished turn ends
    there once the silence has lasted `confirm_ms` (`sure_ms` where the audio and the words
    agree; the answer is prepared meanwhile), an unfinished one waits for more speech, at
    most `max_pause_ms` (all by `eagerness`). Speech is found as `server_vad` finds it, with
    its defaults."""

    type: Literal["semantic_vad"] = "semantic_vad"
    eagerness: Literal["low", "medium", "high", "auto"] = "auto"
    create_response: bool = True
    interrupt_response: bool = True

    threshold: ClassVar[float] = ServerVad.model_fields["threshold"].default
    prefix_padding_ms: ClassVar[int] = ServerVad.model_fields["prefix_padding_ms"].default

    @property
    def max_pause_ms(self) -> int:
        return EAGERNESS_MAX_PAUSE_MS[self.eagerness]

    @property
    def confirm_ms(self) -> int:
        return EAGERNESS_CONFIRM_MS[self.eagerness]

    @property
    def sure_ms(self) -> int:
        return EAGERNESS_SURE_MS[self.eagerness]

    def as_server_vad(self) -> ServerVad:
        """The server VAD that stands in where the end-of-turn model is not installed."""
        return ServerVad(
            create_response=self.create_response, interrupt_response=self.interrupt_response
        )


TurnDetection = Annotated[ServerVad | SemanticVad, Field(discriminator="type")]


class Transcription(_Model):
    model: str | None = None
    language: str | None = None
    prompt: str | None = None


class AudioInput(_Model):
    format: AudioFormat = Field(default_factory=AudioFormat)
    transcription: Transcription | None = None
    turn_detection: TurnDetection | None = Field(default_factory=ServerVad)


class AudioOutput(_Model):
    format: AudioFormat = Field(default_factory=AudioFormat)
    voice: str = DEFAULT_VOICE
    speed: Annotated[float, Field(ge=MIN_SPEED, le=MAX_SPEED)] = 1.0

    @property
    def kokoro_voice(self) -> str:
        return REALTIME_VOICES.get(self.voice, self.voice)


class AudioConfig(_Model):
    input: AudioInput = Field(default_factory=AudioInput)
    output: AudioOutput = Field(default_factory=AudioOutput)


class SessionConfig(_Model):
    """The GA ``session`` object (``type: "realtime"``), the part of it the agent acts on."""

    type: Literal["realtime"] = "realtime"
    instructions: str = ""
    output_modalities: list[Literal["text", "audio"]] = Field(default_factory=lambda: ["audio"])
    audio: AudioConfig = Field(default_factory=AudioConfig)

    def wire(self, session_id: str, model: str) -> dict[str, Any]:
        """The session as ``session.created`` / ``session.updated`` carry it."""
        data = self.model_dump(mode="json")
        data["audio"]["input"]["format"] = self.audio.input.format.wire()
        data["audio"]["output"]["format"] = self.audio.output.format.wire()
        return {**data, "object": "realtime.session", "id": session_id, "model": model}


_UNSUPPORTED_SESSION = {
    "tools": "tools (function calling and MCP)",
    "prompt": "a stored prompt",
}


def updated_session(
    current: SessionConfig, update: Any, event_id: str | None = None
) -> SessionConfig:
    """`current` with a ``session.update``'s ``session`` merged in (fields it leaves out keep
    their values; ``turn_detection: null`` or ``false`` turns turn detection off, and one of
    another ``type`` replaces it whole)."""
    if not isinstance(update, dict):
        raise RealtimeError("session must be an object", param="session", event_id=event_id)
    if update.get("type", "realtime") != "realtime":
        raise unsupported(f"a {update.get('type')!r} session", "session.type", event_id)
    for name, what in _UNSUPPORTED_SESSION.items():
        if update.get(name):
            raise unsupported(what, f"session.{name}", event_id)
    merged = _merge(current.model_dump(mode="json"), update)
    detection = merged["audio"]["input"].get("turn_detection")
    if isinstance(detection, dict):
        detection.setdefault("type", "server_vad")
    try:
        return SessionConfig.model_validate(merged)
    except ValidationError as error:
        raise _invalid(error, "session", event_id) from None


def _merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in update.items():
        if key == "turn_detection" and value is False:
            value = None
        if key == "turn_detection" and _retyped(merged.get(key), value):
            merged[key] = value
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        elif value is not None or key == "turn_detection":
            merged[key] = value
    return merged


def _retyped(current: Any, update: Any) -> bool:
    """A turn detection of another ``type`` (``server_vad`` to ``semantic_vad``, say): it
    replaces the current one rather than merging into it."""
    if not isinstance(current, dict) or not isinstance(update, dict):
        return False
    return update.get("type", current.get("type")) != current.get("type")


def _invalid(error: ValidationError, prefix: str, event_id: str | None) -> RealtimeError:
    first = error.errors()[0]
    param = ".".join([prefix, *(str(part) for part in first["loc"])])
    return RealtimeError(f"{param}: {first['msg']}", param=param, event_id=event_id)


# --- conversation items --------------------------------------------------------------------


class ContentPart(_Model):
    type: Literal["input_text", "input_audio", "output_text", "output_audio", "text", "audio"]
    text: str | None = None
    audio: str | None = None
    transcript: str | None = None


class Item(_Model):
    """A ``message`` item (``user``, ``assistant`` or ``system``): the only kind the agent holds."""

    id: str = Field(default_factory=lambda: new_id("item"))
    type: Literal["message"] = "message"
    object: Literal["realtime.item"] = "realtime.item"
    role: Literal["user", "assistant", "system"]
    status: Literal["completed", "incomplete", "in_progress"] = "completed"
    content: list[ContentPart] = Field(default_factory=list)

    @property
    def text(self) -> str:
        """What the item says: its texts and transcripts, in order."""
        return " ".join(
            (part.text or part.transcript or "").strip()
            for part in self.content
            if (part.text or part.transcript or "").strip()
        )

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


def parse_item(data: Any, event_id: str | None = None) -> Item:
    """A client's ``conversation.item.create`` item; other kinds and images are refused by name."""
    if not isinstance(data, dict):
        raise RealtimeError("item must be an object", param="item", event_id=event_id)
    kind = data.get("type", "message")
    if kind != "message":
        raise unsupported(f"an item of type {kind!r}", "item.type", event_id)
    for part in data.get("content") or []:
        if isinstance(part, dict) and part.get("type") == "input_image":
            raise unsupported("image input", "item.content", event_id)
    try:
        return Item.model_validate({**data, "id": data.get("id") or new_id("item")})
    except ValidationError as error:
        raise _invalid(error, "item", event_id) from None


# --- client events -------------------------------------------------------------------------


class _ClientEvent(_Model):
    event_id: str | None = None


class SessionUpdate(_ClientEvent):
    type: Literal["session.update"]
    session: dict[str, Any]


class InputAudioBufferAppend(_ClientEvent):
    type: Literal["input_audio_buffer.append"]
    audio: str


class InputAudioBufferCommit(_ClientEvent):
    type: Literal["input_audio_buffer.commit"]


class InputAudioBufferClear(_ClientEvent):
    type: Literal["input_audio_buffer.clear"]


class ConversationItemCreate(_ClientEvent):
    type: Literal["conversation.item.create"]
    item: dict[str, Any]
    previous_item_id: str | None = None


class ConversationItemDelete(_ClientEvent):
    type: Literal["conversation.item.delete"]
    item_id: str


class ConversationItemTruncate(_ClientEvent):
    type: Literal["conversation.item.truncate"]
    item_id: str
    content_index: Annotated[int, Field(ge=0)] = 0
    audio_end_ms: Annotated[int, Field(ge=0)]


class ResponseParams(_Model):
    instructions: str | None = None
    output_modalities: list[Literal["text", "audio"]] | None = None
    conversation: str | None = None
    metadata: dict[str, str] | None = None
    tools: list[Any] | None = None
    input: list[Any] | None = None


class ResponseCreate(_ClientEvent):
    type: Literal["response.create"]
    response: ResponseParams = Field(default_factory=ResponseParams)


class ResponseCancel(_ClientEvent):
    type: Literal["response.cancel"]
    response_id: str | None = None


class OutputAudioBufferClear(_ClientEvent):
    type: Literal["output_audio_buffer.clear"]


ClientEvent = Annotated[
    SessionUpdate
    | InputAudioBufferAppend
    | InputAudioBufferCommit
    | InputAudioBufferClear
    | ConversationItemCreate
    | ConversationItemDelete
    | ConversationItemTruncate
    | ResponseCreate
    | ResponseCancel
    | OutputAudioBufferClear,
    Field(discriminator="type"),
]
_CLIENT_EVENT: TypeAdapter[ClientEvent] = TypeAdapter(ClientEvent)
CLIENT_EVENT_TYPES = frozenset(
    get_args(model.model_fields["type"].annotation)[0]
    for model in get_args(get_args(ClientEvent)[0])
)
UNSUPPORTED_EVENTS: Mapping[str, str] = {
    "conversation.item.retrieve": "conversation.item.retrieve",
    "transcription_session.update": "a transcription session",
    "input_audio_buffer.dtmf": "DTMF input",
}


def parse_client_event(raw: str | bytes) -> ClientEvent:
    """One client event from a text frame; `RealtimeError` names what is wrong or unsupported."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise RealtimeError("the message is not JSON", code="invalid_json") from None
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise RealtimeError("an event is a JSON object with a type", param="type")
    event_id = data.get("event_id") if isinstance(data.get("event_id"), str) else None
    kind = data["type"]
    if kind in UNSUPPORTED_EVENTS:
        raise unsupported(UNSUPPORTED_EVENTS[kind], "type", event_id)
    if kind not in CLIENT_EVENT_TYPES:
        raise RealtimeError(
            f"unknown event type {kind!r}",
            code="invalid_event_type",
            param="type",
            event_id=event_id,
        )
    try:
        event = _CLIENT_EVENT.validate_python(data)
    except ValidationError as error:
        raise _invalid(error, kind, event_id) from None
    if isinstance(event, ResponseCreate):
        if event.response.tools:
            raise unsupported("tools (function calling and MCP)", "response.tools", event_id)
        if event.response.input is not None:
            raise unsupported("a response with its own input", "response.input", event_id)
    return event


# --- server events -------------------------------------------------------------------------


class ServerEvent(BaseModel):
    """Every server event has a fresh ``event_id`` and its ``type``."""

    event_id: str = Field(default_factory=lambda: new_id("event"))
    type: str

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class _SessionEvent(ServerEvent):
    session: dict[str, Any]


class SessionCreated(_SessionEvent):
    type: Literal["session.created"] = "session.created"


class SessionUpdated(_SessionEvent):
    type: Literal["session.updated"] = "session.updated"


class _ItemIdEvent(ServerEvent):
    """An event about one item, named by its id."""

    item_id: str


class SpeechStarted(_ItemIdEvent):
    type: Literal["input_audio_buffer.speech_started"] = "input_audio_buffer.speech_started"
    audio_start_ms: int


class SpeechStopped(_ItemIdEvent):
    type: Literal["input_audio_buffer.speech_stopped"] = "input_audio_buffer.speech_stopped"
    audio_end_ms: int


class BufferCommitted(_ItemIdEvent):
    type: Literal["input_audio_buffer.committed"] = "input_audio_buffer.committed"
    previous_item_id: str | None = None


class BufferCleared(ServerEvent):
    type: Literal["input_audio_buffer.cleared"] = "input_audio_buffer.cleared"


class _ItemEvent(ServerEvent):
    item: dict[str, Any]
    previous_item_id: str | None = None


class ItemAdded(_ItemEvent):
    type: Literal["conversation.item.added"] = "conversation.item.added"


class ItemDone(_ItemEvent):
    type: Literal["conversation.item.done"] = "conversation.item.done"


class ItemDeleted(_ItemIdEvent):
    type: Literal["conversation.item.deleted"] = "conversation.item.deleted"


class _ContentEvent(_ItemIdEvent):
    """An event about one content part of an item (the agent's items have one)."""

    content_index: int = 0


class ItemTruncated(_ContentEvent):
    type: Literal["conversation.item.truncated"] = "conversation.item.truncated"
    audio_end_ms: int


class InputTranscriptionCompleted(_ContentEvent):
    type: Literal["conversation.item.input_audio_transcription.completed"] = (
        "conversation.item.input_audio_transcription.completed"
    )
    transcript: str
    usage: dict[str, Any]


class InputTranscriptionDelta(_ContentEvent):
    type: Literal["conversation.item.input_audio_transcription.delta"] = (
        "conversation.item.input_audio_transcription.delta"
    )
    delta: str


class InputTranscriptionFailed(_ContentEvent):
    type: Literal["conversation.item.input_audio_transcription.failed"] = (
        "conversation.item.input_audio_transcription.failed"
    )
    error: dict[str, Any]


class _ResponseEvent(ServerEvent):
    response: dict[str, Any]


class ResponseCreated(_ResponseEvent):
    type: Literal["response.created"] = "response.created"


class ResponseDone(_ResponseEvent):
    type: Literal["response.done"] = "response.done"


class _OutputItemEvent(ServerEvent):
    response_id: str
    output_index: int = 0
    item: dict[str, Any]


class OutputItemAdded(_OutputItemEvent):
    type: Literal["response.output_item.added"] = "response.output_item.added"


class OutputItemDone(_OutputItemEvent):
    type: Literal["response.output_item.done"] = "response.output_item.done"


class _PartEvent(_ContentEvent):
    """An event about the content part an answer is writing."""

    response_id: str
    output_index: int = 0


class _ContentPartEvent(_PartEvent):
    part: dict[str, Any]


class ContentPartAdded(_ContentPartEvent):
    type: Literal["response.content_part.added"] = "response.content_part.added"


class ContentPartDone(_ContentPartEvent):
    type: Literal["response.content_part.done"] = "response.content_part.done"


class _DeltaEvent(_PartEvent):
    delta: str


class OutputAudioDelta(_DeltaEvent):
    type: Literal["response.output_audio.delta"] = "response.output_audio.delta"


class OutputAudioDone(_PartEvent):
    type: Literal["response.output_audio.done"] = "response.output_audio.done"


class TranscriptDelta(_DeltaEvent):
    type: Literal["response.output_audio_transcript.delta"] = (
        "response.output_audio_transcript.delta"
    )


class TranscriptDone(_PartEvent):
    type: Literal["response.output_audio_transcript.done"] = "response.output_audio_transcript.done"
    transcript: str


class OutputTextDelta(_DeltaEvent):
    type: Literal["response.output_text.delta"] = "response.output_text.delta"


class OutputTextDone(_PartEvent):
    type: Literal["response.output_text.done"] = "response.output_text.done"
    text: str


class ErrorEvent(ServerEvent):
    type: Literal["error"] = "error"
    error: dict[str, Any]

    @classmethod
    def of(cls, error: RealtimeError) -> ErrorEvent:
        detail = {
            "type": error.type,
            "code": error.code,
            "message": error.message,
            "param": error.param,
            "event_id": error.event_id,
        }
        return cls(error={k: v for k, v in detail.items() if v is not None})


ResponseStatus = Literal["completed", "cancelled", "failed", "incomplete", "in_progress"]


def response_object(
    response_id: str,
    status: ResponseStatus,
    *,
    output: list[dict[str, Any]] | None = None,
    modalities: list[str] | None = None,
    voice: str | None = None,
    output_format: AudioFormat | None = None,
    details: dict[str, Any] | None = None,
    metadata: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The ``response`` of ``response.created`` and ``response.done``."""
    response: dict[str, Any] = {
        "id": response_id,
        "object": "realtime.response",
        "status": status,
        "output": output or [],
        "output_modalities": modalities or ["audio"],
    }
    if voice is not None and output_format is not None:
        response["audio"] = {"output": {"voice": voice, "format": output_format.wire()}}
    if details is not None:
        response["status_details"] = details
    if metadata is not None:
        response["metadata"] = metadata
    return response
