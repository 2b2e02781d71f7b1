"""The engine's errors: each carries the protocol code the server answers with.

They are `SpeechFault`s (the one error root below the faces), so a face that catches
`SpeechFault` answers an engine refusal with its own code, no translation in between.
"""

from __future__ import annotations

from typing import ClassVar

from voicestream.protocol.errors import ErrorCode, SpeechFault


class EngineError(SpeechFault):
    """Base of every error the engine raises on purpose; ``code`` is the class's."""

    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL  # type: ignore[misc]

    def __init__(self, message: str, request_id: str | None = None) -> None:
        super().__init__(type(self).code, message, request_id)


class InvalidInputError(EngineError):
    """The request itself is wrong; the caller can fix it."""


class EmptyTextError(InvalidInputError):
    code = ErrorCode.TEXT_REQUIRED


class TextTooLongError(InvalidInputError):
    code = ErrorCode.TEXT_TOO_LONG


class UnknownVoiceError(InvalidInputError):
    code = ErrorCode.UNKNOWN_VOICE


class InvalidSpeedError(InvalidInputError):
    code = ErrorCode.INVALID_SPEED


class UnsupportedLanguageError(InvalidInputError):
    code = ErrorCode.UNSUPPORTED_LANGUAGE


class InvalidVoiceBlendError(InvalidInputError):
    code = ErrorCode.INVALID_VOICE_BLEND


class WeightsNotFoundError(EngineError):
    """No source could provide verified weights."""


class DeviceUnavailableError(EngineError):
    """The requested execution device cannot be used on this machine."""
