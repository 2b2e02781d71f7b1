"""The Kokoro-82M engine on ONNX Runtime: weights, voices, phonemes, inference."""

from voicestream.engine.alignment import TimedWord
from voicestream.engine.errors import (
    DeviceUnavailableError,
    EmptyTextError,
    EngineError,
    InvalidInputError,
    InvalidMarkupError,
    InvalidSpeedError,
    InvalidVoiceBlendError,
    TextTooLongError,
    UnknownVoiceError,
    UnsupportedLanguageError,
    WeightsNotFoundError,
)
from voicestream.engine.kokoro import (
    DEFAULT_VOICE,
    MAX_SPEED,
    MIN_SPEED,
    SAMPLE_RATE,
    KokoroEngine,
    Piece,
    RenderedPiece,
)
from voicestream.engine.weights import ModelFiles, resolve_weights

__all__ = [
    "DEFAULT_VOICE",
    "MAX_SPEED",
    "MIN_SPEED",
    "SAMPLE_RATE",
    "DeviceUnavailableError",
    "EmptyTextError",
    "EngineError",
    "InvalidInputError",
    "InvalidMarkupError",
    "InvalidSpeedError",
    "InvalidVoiceBlendError",
    "KokoroEngine",
    "ModelFiles",
    "Piece",
    "RenderedPiece",
    "TextTooLongError",
    "TimedWord",
    "UnknownVoiceError",
    "UnsupportedLanguageError",
    "WeightsNotFoundError",
    "resolve_weights",
]
