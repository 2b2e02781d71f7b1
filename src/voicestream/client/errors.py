"""The errors a speech client raises or reports, as a small hierarchy (in the manner of httpx).

Catch `SpeechError` for everything; catch a subclass to act on one kind of failure: retry
later on `SpeechBusyError`, fix the request on `InvalidRequestError`, reconnect on
`ConnectionLostError`.
"""

from __future__ import annotations

from typing import ClassVar

from voicestream.protocol import ErrorCode, decode_control_frame


class SpeechError(Exception):
    """A request or a session failed. `message` is written for people.

    `code` is the protocol's error code (PROTOCOL.md 1.1) or, for failures the client
    itself detects, a code of its own such as `connection_lost`. `request_id` names the
    request that failed, when the failure belongs to one.
    """

    default_code: ClassVar[str] = ErrorCode.INTERNAL.value

    def __init__(
        self, message: str, *, code: str | None = None, request_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.request_id = request_id

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, "
            f"request_id={self.request_id!r})"
        )


class SpeechBusyError(SpeechError):
    """The server has too many sessions or queued requests; try again later."""

    default_code = ErrorCode.BUSY.value


class RequestStaleError(SpeechError):
    """The request waited too long in the server's queue and was dropped unspoken."""

    default_code = ErrorCode.REQUEST_STALE.value


class InvalidRequestError(SpeechError):
    """The server refused the request itself: no text, an unknown voice, a bad speed..."""

    default_code = ErrorCode.INVALID_MESSAGE.value


class ServerError(SpeechError):
    """The server failed, or answered in a way the protocol does not allow."""

    default_code = ErrorCode.INTERNAL.value


class ConnectionLostError(SpeechError):
    """The connection to the server ended, or could not be made, before the work was done."""

    default_code = "connection_lost"


class SpeechTimeoutError(SpeechError):
    """A call on a session did not finish within its time limit."""

    default_code = "timeout"


class AgentClientError(SpeechError, RuntimeError):
    """The agent could not be reached, or did not answer with a valid event stream.

    Also a `RuntimeError`, which it was before the hierarchy took it in, so that handlers
    written then still catch it.
    """

    default_code = "agent_unavailable"


_INVALID_REQUEST_CODES = frozenset(
    {
        ErrorCode.INVALID_JSON,
        ErrorCode.INVALID_MESSAGE,
        ErrorCode.TEXT_REQUIRED,
        ErrorCode.TEXT_TOO_LONG,
        ErrorCode.UNKNOWN_VOICE,
        ErrorCode.UNSUPPORTED_FORMAT,
        ErrorCode.UNSUPPORTED_SAMPLE_RATE,
        ErrorCode.INVALID_SPEED,
    }
)


def error_from_frame(code: str, message: str, request_id: str | None = None) -> SpeechError:
    """The exception for the `code` and `message` of an error frame or an HTTP error body.

    Codes this client does not know (from a newer server) are `ServerError`s, so that a
    handler for the whole hierarchy still sees them.
    """
    error_class: type[SpeechError]
    if code == ErrorCode.BUSY:
        error_class = SpeechBusyError
    elif code == ErrorCode.REQUEST_STALE:
        error_class = RequestStaleError
    elif code in _INVALID_REQUEST_CODES:
        error_class = InvalidRequestError
    else:
        error_class = ServerError
    return error_class(message, code=code, request_id=request_id)


def error_from_http(status_code: int, body: bytes) -> SpeechError:
    """The exception for an HTTP error answer, from its `{"error":{"code","message"}}` body.

    A body of another shape (a proxy's error page, say) still gives an error that names the
    status, so nothing is lost when the server in front is not ours.
    """
    detail = decode_control_frame(body)
    error = detail.get("error") if detail is not None else None
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        message = error.get("message")
        return error_from_frame(
            error["code"], message if isinstance(message, str) else f"HTTP {status_code}"
        )
    if status_code in (429, 503):
        return SpeechBusyError(f"the server is busy (HTTP {status_code})")
    return ServerError(f"the server answered HTTP {status_code}", code=f"http_{status_code}")
