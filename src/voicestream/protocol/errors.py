"""Error codes of the wire protocol and the one exception root that carries one.

`SpeechFault` is what every layer below the faces raises on purpose (the protocol's parsers,
the server's refusals, which carry the engine's, and failures): a code of `ErrorCode`, a
message written for people and safe to send back, and the request it concerns when known.
Each face maps a fault once, to its own shape (`messages.fault_frame` for the session's and
the SSE routes' `error`, `http_status` for an HTTP answer, Cartesia's and Wyoming's own).
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """Every `code` an `error` frame or event may carry (PROTOCOL.md).

    The first eleven are the speech server's codes of PROTOCOL.md 1.1; then the speech
    server's extensions (languages and voice blends; bodies over the size limit); the
    access policy's refusals, which both servers send (`voicestream.access`); the rest are
    documented extensions the agent runtime sends in its `error` events, the last four
    about a spoken question (voice input).

    `CANCELLED` is reserved and sent by no server: a client's own cancel is answered with
    `synthesis_cancelled` (not an error), and a request the speech server cancels itself is
    one whose listener is gone (a client hung up, a route ended), so there is nobody to tell.
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
    # Speech server extensions: languages and voice blends; limits; markup (SSML, phonemes, lexicons).
    UNSUPPORTED_LANGUAGE = "unsupported_language"
    INVALID_VOICE_BLEND = "invalid_voice_blend"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    INVALID_MARKUP = "invalid_markup"
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


_HTTP_STATUS = {
    ErrorCode.BUSY: 503, ErrorCode.TEXT_TOO_LONG: 413, ErrorCode.PAYLOAD_TOO_LARGE: 413,
    ErrorCode.REQUEST_STALE: 408, ErrorCode.INTERNAL: 500, ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.FORBIDDEN: 403, ErrorCode.UNSUPPORTED_MEDIA_TYPE: 415,
}


def http_status(code: ErrorCode | str) -> int:
    """The HTTP status that answers ``code`` (PROTOCOL.md 1.6): 400 unless listed."""
    try:
        return _HTTP_STATUS.get(ErrorCode(code), 400)
    except ValueError:  # a code of another protocol's (none today)
        return 400


class SpeechFault(Exception):
    """The root of every error raised on purpose below the faces: a protocol ``code``, a
    ``message`` for people (safe to send back) and the ``request_id`` it concerns, if known.

    Subclasses say where it came from (`ProtocolError`, the server's `RequestRejected`, which
    carries the engine's refusals too, and `JobFailed`); a face catches this one class and maps it
    with `fault_frame` or `http_status`. Any cause has been logged already, once.
    """

    def __init__(self, code: ErrorCode, message: str, request_id: str | None = None) -> None:
        super().__init__(message)
        self.code = ErrorCode(code)
        self.message = message
        self.request_id = request_id

    @property
    def http_status(self) -> int:
        return http_status(self.code)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code.value!r}, message={self.message!r})"


class ProtocolError(SpeechFault):
    """A message broke the protocol; `message` is written for people and safe to send back.

    `request_id` is the id the offending message carried, when it carried a usable one, so
    that the server can address its `error` frame to that request.
    """
