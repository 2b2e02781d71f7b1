"""Error codes of the wire protocol and the exception that carries one."""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """Every `code` an `error` frame or event may carry (PROTOCOL.md).

    The first eleven are the speech server's codes of PROTOCOL.md 1.1; then the speech
    server's extensions (languages and voice blends; bodies over the size limit); the
    access policy's refusals, which both servers send (`voicestream.access`); the rest are
    documented extensions the agent runtime sends in its `error` events, the last four
    about a spoken question (voice input).
    """

    INVALID_JSON = "invalid_json"
    INVALID_MESSAGE = "invalid_message"
    TEXT_REQUIRED = "text_required"
    TEXT_TOO_LONG = "text_too_long"
    UNKNOWN_VOICE = "unknown_voice"
    UNSUPPORTED_FORMAT = "unsupported_format"
    UNSUPPORTED_SAMPLE_RATE = "unsupported_sample_rate"
    INVALID_SPEED = "invalid_speed"
    BUSY = "busy"
    REQUEST_STALE = "request_stale"
    INTERNAL = "internal"
    # Speech server extensions: languages and voice blends; limits.
    UNSUPPORTED_LANGUAGE = "unsupported_language"
    INVALID_VOICE_BLEND = "invalid_voice_blend"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    # The access policy, on both servers.
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    # Agent runtime extensions.
    SPEECH_UNAVAILABLE = "speech_unavailable"
    LLM_ERROR = "llm_error"
    CANCELLED = "cancelled"
    ANSWER_TIMEOUT = "answer_timeout"
    # Agent runtime, voice input.
    ASR_UNAVAILABLE = "asr_unavailable"
    INVALID_AUDIO = "invalid_audio"
    AUDIO_TOO_LARGE = "audio_too_large"
    NO_SPEECH = "no_speech"


class ProtocolError(Exception):
    """A message broke the protocol; `message` is written for people and safe to send back.

    `request_id` is the id the offending message carried, when it carried a usable one, so
    that the server can address its `error` frame to that request.
    """

    def __init__(self, code: ErrorCode, message: str, request_id: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id

    def __repr__(self) -> str:
        return f"ProtocolError(code={self.code.value!r}, message={self.message!r})"
