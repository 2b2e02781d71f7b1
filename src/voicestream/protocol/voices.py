"""The voice catalog (`voicestream.catalog`) as the wire answers it: a language or a blend
the catalog refuses is a `ProtocolError` with the protocol's code (``unsupported_language``,
``invalid_voice_blend``). The rest of the catalog is the protocol's as it is (the package
exports it).
"""

from __future__ import annotations

from voicestream import catalog
from voicestream.catalog import VoiceBlend
from voicestream.protocol.errors import ErrorCode, ProtocolError


def resolve_language(code: str) -> str:
    """The engine's code for ``code`` (`catalog.resolve_language`), or ``unsupported_language``."""
    try:
        return catalog.resolve_language(code)
    except catalog.UnsupportedLanguage as error:
        raise ProtocolError(ErrorCode.UNSUPPORTED_LANGUAGE, str(error)) from None


def parse_voice(spec: str) -> VoiceBlend:
    """A voice name or a blend (`catalog.parse_voice`), or ``invalid_voice_blend``."""
    try:
        return catalog.parse_voice(spec)
    except catalog.InvalidVoiceBlend as error:
        raise ProtocolError(ErrorCode.INVALID_VOICE_BLEND, str(error)) from None
