"""The Kokoro-82M engine on ONNX Runtime: weights, voices, phonemes, inference."""

from voicestream.engine.errors import (
    DeviceUnavailableError,
    EmptyTextError,
    EngineError,
    InvalidInputError,
    InvalidSpeedError,
    TextTooLongError,
    UnknownVoiceError,
    WeightsNotFoundError,
)
from voicestream.engine.kokoro import (
    DEFAULT_VOICE,
    MAX_SPEED,
    MIN_SPEED,
    SAMPLE_RATE,
    KokoroEngine,
    Piece,
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
    "InvalidSpeedError",
    "KokoroEngine",
    "ModelFiles",
    "Piece",
    "TextTooLongError",
    "UnknownVoiceError",
    "WeightsNotFoundError",
    "resolve_weights",
]
