"""The engine's errors, in its own words: each says what went wrong in a ``message`` written
for people (safe to show).

The engine knows no wire: the server maps a refusal to its protocol's code once, where a
request is checked (`voicestream.speech.core`), and the command line prints the message.
"""

from __future__ import annotations


class EngineError(Exception):
    """Base of every error the engine raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInputError(EngineError):
    """The request itself is wrong; the caller can fix it."""


class EmptyTextError(InvalidInputError):
    """No word to speak."""


class TextTooLongError(InvalidInputError):
    """More characters than the engine takes in one request."""


class UnknownVoiceError(InvalidInputError):
    """A voice (or a voice of a blend) with no pack."""


class InvalidSpeedError(InvalidInputError):
    """A speed outside the catalog's range."""


class UnsupportedLanguageError(InvalidInputError):
    """A language the engine does not speak."""


class InvalidVoiceBlendError(InvalidInputError):
    """A voice spec that breaks the blend syntax, its weights or its one language."""


class InvalidMarkupError(InvalidInputError):
    """SSML, an inline phoneme or a lexicon entry that cannot be read (malformed, a DTD or
    an entity, an unknown phoneme, a break too long): the message says what and where."""


class WeightsNotFoundError(EngineError):
    """No source could provide verified weights."""


class DeviceUnavailableError(EngineError):
    """The requested execution device cannot be used on this machine."""
