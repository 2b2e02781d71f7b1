"""The engine's errors: each input error carries the protocol code the server answers with."""

from __future__ import annotations


class EngineError(Exception):
    """Base of every error the engine raises on purpose."""

    code = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInputError(EngineError):
    """The request itself is wrong; the caller can fix it."""


class EmptyTextError(InvalidInputError):
    code = "text_required"


class TextTooLongError(InvalidInputError):
    code = "text_too_long"


class UnknownVoiceError(InvalidInputError):
    code = "unknown_voice"


class InvalidSpeedError(InvalidInputError):
    code = "invalid_speed"


class UnsupportedLanguageError(InvalidInputError):
    code = "unsupported_language"


class InvalidVoiceBlendError(InvalidInputError):
    code = "invalid_voice_blend"


class WeightsNotFoundError(EngineError):
    """No source could provide verified weights."""


class DeviceUnavailableError(EngineError):
    """The requested execution device cannot be used on this machine."""
