"""Pydantic models of every message of PROTOCOL.md, and the parsers for what clients send.

Inbound messages (what a client sends) are validated strictly: a number is never a string,
`true` is never 1, and every problem becomes a `ProtocolError` whose code names the field at
fault and whose message says what is allowed. Unknown fields are ignored and a `null` counts
as an absent field, so clients of the reference sample and newer clients both keep working.

Outbound frames and events (what the server and the agent send) share `to_json()`, which
writes compact JSON without the optional fields that are unset.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Literal, Self, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from voicestream.catalog import DEFAULT_VOICE, LANGUAGES, MAX_SPEED, MIN_SPEED
from voicestream.protocol._json import loads_strict
from voicestream.protocol.errors import ErrorCode, ProtocolError, SpeechFault
from voicestream.protocol.voices import resolve_language

AudioFormat = Literal["pcm16", "wav", "mp3", "aac", "opus", "flac", "mulaw"]
AUDIO_FORMATS: tuple[str, ...] = get_args(AudioFormat)
"""Formats of the WebSocket session and of `POST /invocations`."""

SampleRate = Literal[8000, 16000, 22050, 24000, 44100, 48000]
SAMPLE_RATES: tuple[int, ...] = get_args(SampleRate)

OpenAIFormat = Literal["mp3", "opus", "aac", "flac", "wav", "pcm"]
OPENAI_FORMATS: tuple[str, ...] = get_args(OpenAIFormat)

AgentMode = Literal["bidi", "batch", "batch-stream"]
AGENT_MODES: tuple[str, ...] = get_args(AgentMode)

SpokenAudioFormat = Literal["webm", "ogg", "wav"]
SPOKEN_AUDIO_FORMATS: tuple[str, ...] = get_args(SpokenAudioFormat)
"""Containers of a spoken question: what browsers record (MediaRecorder), and WAV."""
MAX_SPOKEN_AUDIO_BYTES = 8 * 1024 * 1024
"""A spoken question's size limit once decoded from base64: minutes of Opus, about 80 s of
48 kHz 16-bit WAV."""
_MAX_SPOKEN_AUDIO_BASE64 = -(-MAX_SPOKEN_AUDIO_BYTES // 3) * 4

DEFAULT_SAMPLE_RATE = 24000
MAX_REQUEST_ID_LENGTH = 256

OPENAI_VOICE_MAP: Mapping[str, str] = {
    "alloy": "af_alloy",
    "ash": "am_michael",
    "ballad": "bm_george",
    "coral": "af_bella",
    "echo": "am_echo",
    "fable": "bm_fable",
    "onyx": "am_onyx",
    "nova": "af_nova",
    "sage": "af_sarah",
    "shimmer": "af_sky",
    "verse": "am_puck",
}
"""OpenAI voice names to the nearest Kokoro voice; any other name is taken as a Kokoro voice."""


def new_request_id() -> str:
    """A fresh id for a request that came without one."""
    return uuid.uuid4().hex


SESSION_HEADER = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"
"""The agent's conversation id (PROTOCOL.md section 2): AgentCore's runtime session header."""
MAX_SESSION_ID_CHARS = 256
"""AgentCore's bounds on a runtime session id: 33 to 256 characters."""


def new_session_id() -> str:
    """A fresh conversation id, of a length AgentCore accepts (44 characters)."""
    return f"voicestream-{uuid.uuid4().hex}"


def _not_blank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("blank", "must not be blank")
    return value


def _supported_language(value: str) -> str:
    try:
        return resolve_language(value)
    except ProtocolError:
        raise PydanticCustomError("unsupported_language", "unsupported language") from None


SpokenText = Annotated[str, Field(strict=True), AfterValidator(_not_blank)]
LanguageCode = Annotated[str, Field(strict=True), AfterValidator(_supported_language)]
"""A language code of `LANGUAGES` (short forms such as `fr` accepted), normalized."""
RequestId = Annotated[str, Field(strict=True, min_length=1, max_length=MAX_REQUEST_ID_LENGTH)]
VoiceName = Annotated[str, Field(strict=True)]
Speed = Annotated[float, Field(strict=True, ge=MIN_SPEED, le=MAX_SPEED)]
EpochSeconds = Annotated[float, Field(strict=True, allow_inf_nan=False)]


def _one_of(values: tuple[object, ...]) -> str:
    names = [str(value) for value in values]
    return ", ".join(names[:-1]) + " or " + names[-1]


_TEXT_FIELDS = frozenset({"text", "input", "prompt"})
"""Fields holding the words to speak: missing or blank, they give `text_required`."""

_FIELD_PROBLEMS: Mapping[str, tuple[ErrorCode, str]] = {
    "text": (ErrorCode.INVALID_MESSAGE, "text must be a string"),
    "input": (ErrorCode.INVALID_MESSAGE, "input must be a string"),
    "prompt": (ErrorCode.INVALID_MESSAGE, "prompt must be a string"),
    "type": (ErrorCode.INVALID_MESSAGE, "type must be synthesize, cancel or close"),
    "request_id": (
        ErrorCode.INVALID_MESSAGE,
        f"request_id must be a non-empty string of at most {MAX_REQUEST_ID_LENGTH} characters",
    ),
    "voice": (ErrorCode.INVALID_MESSAGE, "voice must be a string naming a voice, such as af_heart"),
    "speed": (ErrorCode.INVALID_SPEED, f"speed must be a number from {MIN_SPEED} to {MAX_SPEED}"),
    "format": (ErrorCode.UNSUPPORTED_FORMAT, f"format must be {_one_of(AUDIO_FORMATS)}"),
    "response_format": (
        ErrorCode.UNSUPPORTED_FORMAT,
        f"response_format must be {_one_of(OPENAI_FORMATS)}",
    ),
    "sample_rate": (
        ErrorCode.UNSUPPORTED_SAMPLE_RATE,
        f"sample_rate must be {_one_of(SAMPLE_RATES)} (Hz)",
    ),
    "request_timestamp": (
        ErrorCode.INVALID_MESSAGE,
        "request_timestamp must be a number of seconds since the Unix epoch",
    ),
    "stream": (ErrorCode.INVALID_MESSAGE, "stream must be true or false"),
    "return_timestamps": (ErrorCode.INVALID_MESSAGE, "return_timestamps must be true or false"),
    "word_timestamps": (ErrorCode.INVALID_MESSAGE, "word_timestamps must be true or false"),
    "model": (ErrorCode.INVALID_MESSAGE, "model must be a string"),
    "stream_format": (ErrorCode.INVALID_MESSAGE, "stream_format must be audio or sse"),
    "mode": (ErrorCode.INVALID_MESSAGE, f"mode must be {_one_of(AGENT_MODES)}"),
    "audio": (ErrorCode.INVALID_AUDIO, "audio must be the recording as a base64 string"),
    "audio_format": (
        ErrorCode.INVALID_MESSAGE,
        f"audio_format must be {_one_of(SPOKEN_AUDIO_FORMATS)}",
    ),
    "lang": (
        ErrorCode.UNSUPPORTED_LANGUAGE,
        f"lang must be a supported language code: {_one_of(tuple(LANGUAGES))}",
    ),
    "interrupted": (
        ErrorCode.INVALID_MESSAGE,
        (
            "interrupted must be an object with heard_ms, the milliseconds heard (from 0), and "
            "optionally request_id, the id of the answer cut short"
        ),
    ),
}


class WireModel(BaseModel):
    """Base of every message: immutable, unknown fields ignored, compact JSON out."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    def to_json(self) -> str:
        return self.model_dump_json(exclude_none=True)


class InboundMessage(WireModel):
    """A message a client sends; validation problems map to protocol error codes by field."""

    field_problems: ClassVar[Mapping[str, tuple[ErrorCode, str]]] = _FIELD_PROBLEMS

    @model_validator(mode="before")
    @classmethod
    def _null_means_absent(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value is not None}
        return data

    @classmethod
    def describe_problem(cls, error: ErrorDetails) -> tuple[ErrorCode, str]:
        """The code and the human message for one pydantic error of this model."""
        field = str(error["loc"][0]) if error["loc"] else ""
        if field in _TEXT_FIELDS and error["type"] in ("missing", "blank"):
            return ErrorCode.TEXT_REQUIRED, f"{field} is required and must not be blank"
        return cls.field_problems.get(
            field, (ErrorCode.INVALID_MESSAGE, "the message does not follow the protocol")
        )


# --- client to speech server ------------------------------------------------------------


class SynthesizeRequest(InboundMessage):
    """Queue one synthesis on the WebSocket session. `type` may be left out (sample clients)."""

    type: Literal["synthesize"] = "synthesize"
    text: SpokenText
    request_id: RequestId | None = None
    voice: VoiceName = DEFAULT_VOICE
    speed: Speed = 1.0
    lang: LanguageCode | None = None
    format: AudioFormat = "pcm16"
    sample_rate: SampleRate = DEFAULT_SAMPLE_RATE
    request_timestamp: EpochSeconds | None = None
    word_timestamps: Annotated[bool, Field(strict=True)] | None = None
    """*Extension*: true sends a `word_timestamps` frame before each piece's audio; left
    out of the JSON when unset, so a client's messages stay the reference's."""

    def ensure_request_id(self, make_id: Callable[[], str] = new_request_id) -> Self:
        """This request, with an id assigned by the server if the client sent none."""
        if self.request_id is not None:
            return self
        return self.model_copy(update={"request_id": make_id()})


StreamedAudioFormat = Literal["pcm16", "mulaw"]
STREAMED_AUDIO_FORMATS: tuple[str, ...] = get_args(StreamedAudioFormat)
"""Formats of a streamed utterance: its chunks' audio is sent end to end, which only a raw
format allows (a container or a codec's stream would start again with each chunk)."""


class SynthesizePiece(SynthesizeRequest):
    """*Extension*: one piece of an utterance whose text comes in pieces (an LLM's tokens).

    A ``synthesize`` message with ``continue`` is a piece: ``continue: true`` while more
    text will come, ``continue: false`` on the last piece (its text may be empty), which
    ends the utterance. The pieces of one utterance share a ``request_id`` (required); the
    first piece's voice, speed, language, format and ``word_timestamps`` hold for all of
    them; ``chunking`` picks how the server cuts the text (latency mode's short first
    chunk, or whole sentences). Messages without ``continue`` are whole requests, as
    the reference's clients send them."""

    text: Annotated[str, Field(strict=True)] = ""
    request_id: RequestId
    more: Annotated[bool, Field(strict=True, alias="continue")]
    format: StreamedAudioFormat = "pcm16"
    chunking: Literal["latency", "sentences"] = "latency"

    field_problems: ClassVar[Mapping[str, tuple[ErrorCode, str]]] = {
        **_FIELD_PROBLEMS,
        "request_id": (
            ErrorCode.INVALID_MESSAGE,
            (
                "request_id is required with continue (the pieces of one utterance share it): "
                f"a non-empty string of at most {MAX_REQUEST_ID_LENGTH} characters"
            ),
        ),
        "continue": (ErrorCode.INVALID_MESSAGE, "continue must be true or false"),
        "format": (ErrorCode.UNSUPPORTED_FORMAT, f"a streamed utterance's format must be {_one_of(STREAMED_AUDIO_FORMATS)}"),
        "chunking": (ErrorCode.INVALID_MESSAGE, "chunking must be latency or sentences"),
    }

    def to_json(self) -> str:
        return self.model_dump_json(exclude_none=True, by_alias=True)


class CancelRequest(InboundMessage):
    """*Extension*: drop one request, or every queued and running one (barge-in)."""

    type: Literal["cancel"] = "cancel"
    request_id: RequestId | None = None


class CloseRequest(InboundMessage):
    """Finish every accepted request, then close the session."""

    type: Literal["close"] = "close"


ClientMessage = SynthesizeRequest | SynthesizePiece | CancelRequest | CloseRequest

_CLIENT_MESSAGES: Mapping[str, type[ClientMessage]] = {
    "synthesize": SynthesizeRequest,
    "cancel": CancelRequest,
    "close": CloseRequest,
}


class PostSynthesisRequest(InboundMessage):
    """Body of `POST /invocations` on the speech server: one text, audio streamed back."""

    text: SpokenText
    request_id: RequestId | None = None
    voice: VoiceName = DEFAULT_VOICE
    speed: Speed = 1.0
    lang: LanguageCode | None = None
    format: AudioFormat = "wav"
    sample_rate: SampleRate = DEFAULT_SAMPLE_RATE
    stream: Annotated[bool, Field(strict=True)] = True
    request_timestamp: EpochSeconds | None = None


class OpenAISpeechRequest(InboundMessage):
    """Body of `POST /v1/audio/speech`, OpenAI's speech API.

    OpenAI accepts speeds from 0.25 to 4.0; Kokoro sounds broken well before either end, so
    we accept 0.5 to 2.0, the range of our own routes, and answer `invalid_speed` outside it
    rather than silently clamping. `model` is accepted and ignored, and so are
    `instructions` (Kokoro cannot follow them). `voice` takes OpenAI's names (mapped by
    `OPENAI_VOICE_MAP`) or any Kokoro voice name.
    """

    model: Annotated[str, Field(strict=True)] = "kokoro"
    input: SpokenText
    voice: VoiceName = DEFAULT_VOICE
    response_format: OpenAIFormat = "mp3"
    speed: Speed = 1.0
    lang: LanguageCode | None = None
    stream_format: Literal["audio", "sse"] | None = None

    field_problems: ClassVar[Mapping[str, tuple[ErrorCode, str]]] = {
        **_FIELD_PROBLEMS,
        "speed": (
            ErrorCode.INVALID_SPEED,
            (
                f"speed must be a number from {MIN_SPEED} to {MAX_SPEED} "
                "(the OpenAI range of 0.25 to 4.0 is not supported in full)"
            ),
        ),
    }

    @property
    def kokoro_voice(self) -> str:
        return OPENAI_VOICE_MAP.get(self.voice, self.voice)

    @property
    def audio_format(self) -> AudioFormat:
        """Our name for the requested format: OpenAI's `pcm` is our `pcm16` (24 kHz, s16le)."""
        return "pcm16" if self.response_format == "pcm" else self.response_format


class CaptionedSpeechRequest(OpenAISpeechRequest):
    """Body of `POST /dev/captioned_speech`, Kokoro-FastAPI's route for audio with word
    timestamps: OpenAI's fields, streamed by default (one JSON object per line)."""

    stream: Annotated[bool, Field(strict=True)] = True
    return_timestamps: Annotated[bool, Field(strict=True)] = True


# --- speech server to client ------------------------------------------------------------


class SynthesisStart(WireModel):
    type: Literal["synthesis_start"] = "synthesis_start"
    request_id: str
    format: AudioFormat
    sample_rate: int
    channels: int = 1


class SynthesisComplete(WireModel):
    """End of one request's audio; `first_audio_ms` is an *extension*."""

    type: Literal["synthesis_complete"] = "synthesis_complete"
    request_id: str
    audio_bytes: int
    total_duration_s: float
    elapsed_s: float
    first_audio_ms: float | None = None


class ErrorFrame(WireModel):
    """An error for one request, or for the session when `request_id` is unknown."""

    type: Literal["error"] = "error"
    request_id: str | None = None
    code: str
    message: str

    def to_http_json(self) -> str:
        """The body of an HTTP error answer: `{"error":{"code":...,"message":...}}`."""
        return json.dumps(
            {"error": {"code": self.code, "message": self.message}},
            ensure_ascii=False,
            separators=(",", ":"),
        )


def fault_frame(fault: SpeechFault, request_id: str | None = None) -> ErrorFrame:
    """The `error` frame (session, SSE) that answers ``fault``, addressed to ``request_id``
    if given, else to the fault's own."""
    return ErrorFrame(
        request_id=request_id if request_id is not None else fault.request_id,
        code=fault.code,
        message=fault.message,
    )


class SynthesisCancelled(WireModel):
    type: Literal["synthesis_cancelled"] = "synthesis_cancelled"
    request_id: str


class AudioEvent(WireModel):
    """One piece of audio in the Server-Sent Events answer of `POST /invocations`."""

    type: Literal["audio"] = "audio"
    seq: int
    data: str

    @classmethod
    def from_audio(cls, seq: int, audio: bytes) -> AudioEvent:
        return cls(seq=seq, data=base64.b64encode(audio).decode("ascii"))

    def audio(self) -> bytes:
        return base64.b64decode(self.data)


class WordTiming(WireModel):
    """One written word (as the user sent it, before normalization, markup markers left
    out) and when it is spoken, in seconds from the start of its request's audio.

    ``start_char`` and ``end_char`` (*extension*) are the word's offsets in the text as
    sent, in Unicode code points, end exclusive: ``text[start_char:end_char]`` is the word,
    or holds it with the markers it was written with ("**bold**")."""

    model_config = ConfigDict(from_attributes=True)
    """Any object with these fields validates as one (the server's words are the engine's own
    dataclass): a face builds its frames from the words it is handed, converting nothing."""

    word: str
    start_s: float
    end_s: float
    start_char: int | None = None
    end_char: int | None = None


class WordTimestamps(WireModel):
    """*Extension*: the words of the piece of audio that follows this frame (a request that
    asked with `word_timestamps: true` gets one per piece, before that piece's audio)."""

    type: Literal["word_timestamps"] = "word_timestamps"
    request_id: str
    words: tuple[WordTiming, ...]


ServerFrame = (
    SynthesisStart | SynthesisComplete | ErrorFrame | SynthesisCancelled | AudioEvent | WordTimestamps
)
"""Every JSON frame of the speech server, and the events of its SSE answer."""


# --- agent runtime ------------------------------------------------------------------------


MAX_HEARD_MS = 24 * 3600 * 1000


class Interruption(InboundMessage):
    """*Extension*: the listener stopped an answer after hearing `heard_ms` of its audio (the
    answer `request_id`, by default the conversation's last); sent with the next question."""

    heard_ms: Annotated[float, Field(strict=True, ge=0, le=MAX_HEARD_MS, allow_inf_nan=False)]
    request_id: RequestId | None = None


class AgentRequest(InboundMessage):
    """Body of the agent runtime's `POST /invocations`."""

    prompt: SpokenText
    mode: AgentMode = "bidi"
    voice: VoiceName = DEFAULT_VOICE
    speed: Speed = 1.0
    lang: LanguageCode | None = None
    interrupted: Interruption | None = None


_AUDIO_TOO_LARGE = f"audio must hold at most {MAX_SPOKEN_AUDIO_BYTES // (1024 * 1024)} MiB"


class AgentAudioRequest(InboundMessage):
    """*Extension*: the agent's `POST /invocations` with a spoken question instead of a
    prompt; the agent transcribes it and answers the words it heard."""

    audio: Annotated[str, Field(strict=True, min_length=1, max_length=_MAX_SPOKEN_AUDIO_BASE64)]
    audio_format: SpokenAudioFormat
    mode: AgentMode = "bidi"
    voice: VoiceName = DEFAULT_VOICE
    speed: Speed = 1.0
    lang: LanguageCode | None = None
    interrupted: Interruption | None = None

    @classmethod
    def describe_problem(cls, error: ErrorDetails) -> tuple[ErrorCode, str]:
        if error["loc"] and error["loc"][0] == "audio" and error["type"] == "string_too_long":
            return ErrorCode.AUDIO_TOO_LARGE, _AUDIO_TOO_LARGE
        return super().describe_problem(error)

    def recording(self) -> bytes:
        """The recording's bytes; `invalid_audio` unless `audio` is base64."""
        try:
            data = base64.b64decode(self.audio, validate=True)
        except ValueError:
            raise ProtocolError(ErrorCode.INVALID_AUDIO, "audio is not valid base64") from None
        return data

    def asking(self, prompt: str) -> AgentRequest:
        """The typed request this spoken one amounts to, once its words are known."""
        return AgentRequest(
            prompt=prompt, mode=self.mode, voice=self.voice, speed=self.speed, lang=self.lang,
            interrupted=self.interrupted,
        )


class AgentEventBase(WireModel):
    """Fields of every agent event; `t_ms` counts milliseconds since `agent_start`."""

    type: str
    request_id: str
    t_ms: float


class Transcript(AgentEventBase):
    """*Extension*: the words heard in a spoken question; the first event of its answer."""

    type: Literal["transcript"] = "transcript"
    text: str


class AgentStart(AgentEventBase):
    type: Literal["agent_start"] = "agent_start"
    mode: AgentMode


class TextDelta(AgentEventBase):
    type: Literal["text_delta"] = "text_delta"
    seq: int
    text: str


class SentenceSent(AgentEventBase):
    """*Extension*: a piece of the answer (`text`, as the LLM wrote it) was sent to speech
    as sentence `index`; the `audio_chunk`s with that `sentence` speak it."""

    type: Literal["sentence"] = "sentence"
    index: int
    text: str


class AudioStreamStart(AgentEventBase):
    type: Literal["audio_stream_start"] = "audio_stream_start"
    format: AudioFormat
    sample_rate: int
    voice: str


class AudioChunk(AgentEventBase):
    """Base64 audio; `sentence` is the index of the sentence it speaks."""

    type: Literal["audio_chunk"] = "audio_chunk"
    seq: int
    data: str
    sentence: int

    def audio(self) -> bytes:
        return base64.b64decode(self.data)


class SentenceWords(AgentEventBase):
    """*Extension*: when each word of sentence `sentence` is spoken, in seconds from the start
    of that sentence's audio (from the speech server's `word_timestamps` frames); it comes
    before that part of the sentence's audio."""

    type: Literal["word_timestamps"] = "word_timestamps"
    sentence: int
    words: tuple[WordTiming, ...]


class AudioStreamEnd(AgentEventBase):
    type: Literal["audio_stream_end"] = "audio_stream_end"
    total_chunks: int
    duration_s: float


class AgentEnd(AgentEventBase):
    """`ttft_ms` / `ttfa_ms` are left out when the answer had no text / no audio.

    Extension for measurements: `first_sentence_ms`, when the first speech request left for
    the speech server, and `first_sentence_synthesis_s`, the server's time to render it."""

    type: Literal["agent_end"] = "agent_end"
    ttft_ms: float | None = None
    ttfa_ms: float | None = None
    first_sentence_ms: float | None = None
    first_sentence_synthesis_s: float | None = None


class AgentError(AgentEventBase):
    type: Literal["error"] = "error"
    code: str
    message: str


AgentEvent = (
    Transcript
    | AgentStart
    | TextDelta
    | SentenceSent
    | AudioStreamStart
    | AudioChunk
    | SentenceWords
    | AudioStreamEnd
    | AgentEnd
    | AgentError
)


# --- parsing ------------------------------------------------------------------------------

JSONInput = str | bytes | bytearray | memoryview | Mapping[str, Any]


def _encodable(value: object) -> bool:
    """False for text holding a lone surrogate: JSON lets `\\ud800` through, UTF-8 does not."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def load_json_object(data: JSONInput) -> dict[str, Any]:
    """Decode one message to a dict: `invalid_json` unless UTF-8 JSON, `invalid_message`
    unless an object. A mapping (a payload some framework already parsed) is taken as is."""
    if isinstance(data, Mapping):
        return dict(data)
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError(ErrorCode.INVALID_JSON, "a message must be UTF-8 JSON") from None
    try:
        value = loads_strict(text)
    except (ValueError, RecursionError):
        raise ProtocolError(ErrorCode.INVALID_JSON, "the message is not valid JSON") from None
    if "\\u" in text and not _encodable(value):
        raise ProtocolError(
            ErrorCode.INVALID_JSON, "the message escapes a lone UTF-16 surrogate (\\ud800-\\udfff)"
        )
    if not isinstance(value, dict):
        raise ProtocolError(
            ErrorCode.INVALID_MESSAGE, 'a message must be a JSON object, such as {"text": ...}'
        )
    return value


def _request_id_of(message: Mapping[str, Any]) -> str | None:
    request_id = message.get("request_id")
    if isinstance(request_id, str) and 0 < len(request_id) <= MAX_REQUEST_ID_LENGTH:
        return request_id
    return None


def _validate[M: InboundMessage](model: type[M], message: dict[str, Any]) -> M:
    try:
        return model.model_validate(message)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_context=False, include_input=False)[0]
        code, text = model.describe_problem(first)
        raise ProtocolError(code, text, _request_id_of(message)) from None


def parse_client_message(data: str | bytes) -> ClientMessage:
    """One WebSocket message, from a text or a binary frame. Raises `ProtocolError`.

    Without `type` a message is a synthesis request (the reference sample sends none), so
    `{}` is answered with `text_required`, not `invalid_message`.
    """
    message = load_json_object(data)
    kind = message.get("type")
    if kind is None:
        kind = "synthesize"
    model = _CLIENT_MESSAGES.get(kind) if isinstance(kind, str) else None
    if model is None:
        code, text = _FIELD_PROBLEMS["type"]
        raise ProtocolError(code, text, _request_id_of(message))
    if model is SynthesizeRequest and message.get("continue") is not None:
        return _validate(SynthesizePiece, message)
    return _validate(model, message)


def parse_post_request(data: JSONInput) -> PostSynthesisRequest:
    """The body of the speech server's `POST /invocations`. Raises `ProtocolError`."""
    return _validate(PostSynthesisRequest, load_json_object(data))


def parse_openai_request(data: JSONInput) -> OpenAISpeechRequest:
    """The body of `POST /v1/audio/speech`. Raises `ProtocolError`."""
    return _validate(OpenAISpeechRequest, load_json_object(data))


def parse_captioned_request(data: JSONInput) -> CaptionedSpeechRequest:
    """The body of `POST /dev/captioned_speech`. Raises `ProtocolError`."""
    return _validate(CaptionedSpeechRequest, load_json_object(data))


def parse_agent_request(data: JSONInput) -> AgentRequest | AgentAudioRequest:
    """The body of the agent runtime's `POST /invocations`: a typed `prompt`, or a spoken
    question in `audio` (not both). Raises `ProtocolError`."""
    message = load_json_object(data)
    if "audio" in message and message["audio"] is not None:
        if message.get("prompt") is not None:
            raise ProtocolError(ErrorCode.INVALID_MESSAGE, "send either prompt or audio, not both")
        return _validate(AgentAudioRequest, message)
    return _validate(AgentRequest, message)


_SERVER_FRAME: TypeAdapter[ServerFrame] = TypeAdapter(
    Annotated[ServerFrame, Field(discriminator="type")]
)
_AGENT_EVENT: TypeAdapter[AgentEvent] = TypeAdapter(
    Annotated[AgentEvent, Field(discriminator="type")]
)


def _types_of(union: Any) -> str:
    return _one_of(tuple(model.model_fields["type"].default for model in get_args(union)))


def parse_server_frame(data: JSONInput) -> ServerFrame:
    """A JSON frame or SSE event of the speech server, for clients. Raises `ProtocolError`."""
    message = load_json_object(data)
    try:
        return _SERVER_FRAME.validate_python(message)
    except ValidationError:
        raise ProtocolError(
            ErrorCode.INVALID_MESSAGE,
            f"not a speech server frame: expected type {_types_of(ServerFrame)} with its fields",
            _request_id_of(message),
        ) from None


def parse_agent_event(data: JSONInput) -> AgentEvent:
    """One event of the agent runtime's stream, for clients. Raises `ProtocolError`."""
    message = load_json_object(data)
    try:
        return _AGENT_EVENT.validate_python(message)
    except ValidationError:
        raise ProtocolError(
            ErrorCode.INVALID_MESSAGE,
            f"not an agent event: expected type {_types_of(AgentEvent)} with its fields",
            _request_id_of(message),
        ) from None
