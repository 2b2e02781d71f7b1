"""Kokoro's voices and languages as pure data, written once: what a voice name says about its
language and gender, which languages can be asked for, the blend syntax ``a+b`` /
``a(2)+b(1)``, the default voice and the speed range.

Kokoro's voice names follow one pattern: a language letter, a gender letter, an underscore
and a name (``af_heart`` is an American English female voice). The engine speaks by this
catalog, the protocol validates requests against it (`voicestream.protocol.voices` gives its
errors the wire's codes), and the agent and the web pages read it to group or describe
voices without loading the engine. This module imports nothing of voicestream's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

DEFAULT_LANGUAGE = "en-us"
DEFAULT_VOICE = "af_heart"
MIN_SPEED = 0.5
MAX_SPEED = 2.0


class UnsupportedLanguage(ValueError):
    """A language code that is not one of `LANGUAGES`, nor a short form of one."""


class InvalidVoiceBlend(ValueError):
    """A voice spec that breaks the blend syntax, its weights or its one language."""


@dataclass(frozen=True)
class Language:
    """A language the engine speaks: its code on the wire, its name for people, its voice letter."""

    code: str
    name: str
    letter: str


LANGUAGES: Mapping[str, Language] = {
    language.code: language
    for language in (
        Language("en-us", "English (US)", "a"),
        Language("en-gb", "English (UK)", "b"),
        Language("es", "Spanish", "e"),
        Language("fr-fr", "French", "f"),
        Language("hi", "Hindi", "h"),
        Language("it", "Italian", "i"),
        Language("ja", "Japanese", "j"),
        Language("pt-br", "Portuguese (Brazil)", "p"),
        Language("zh", "Chinese (Mandarin)", "z"),
    )
}
"""Every language code a request may name, in catalog order."""

LANGUAGE_BY_LETTER: Mapping[str, str] = {language.letter: code for code, language in LANGUAGES.items()}

_LANGUAGE_ALIASES: Mapping[str, str] = {
    "en": "en-us",
    "fr": "fr-fr",
    "pt": "pt-br",
    "es-es": "es",
    "it-it": "it",
    "hi-in": "hi",
    "ja-jp": "ja",
    "zh-cn": "zh",
    "cmn": "zh",
}
"""Short and regional forms people write, mapped to the code the engine uses."""

GENDER_BY_LETTER: Mapping[str, str] = {"f": "female", "m": "male"}

_VOICE_NAME = re.compile(r"([a-z])([a-z])_\w+")
_BLEND_PART = re.compile(r"\s*([A-Za-z0-9_\-.]+)\s*(?:\(\s*([^()]*?)\s*\))?\s*")


@dataclass(frozen=True)
class VoiceInfo:
    """One voice as ``GET /voices`` lists it; ``language``/``gender`` are None when the name
    does not follow Kokoro's pattern (a custom pack in a model directory)."""

    name: str
    language: str | None
    gender: str | None

    def to_dict(self) -> dict[str, str | None]:
        return {"name": self.name, "language": self.language, "gender": self.gender}


def describe_voice(name: str) -> VoiceInfo:
    """Language and gender as the voice's first two letters name them."""
    match = _VOICE_NAME.fullmatch(name)
    if match is None:
        return VoiceInfo(name, None, None)
    return VoiceInfo(name, LANGUAGE_BY_LETTER.get(match[1]), GENDER_BY_LETTER.get(match[2]))


def voice_catalog(names: Iterable[str]) -> list[VoiceInfo]:
    """The voices described, grouped by language in catalog order, then by name."""
    order = {code: index for index, code in enumerate(LANGUAGES)}
    infos = [describe_voice(name) for name in names]
    return sorted(infos, key=lambda info: (order.get(info.language or "", len(order)), info.name))


def resolve_language(code: str) -> str:
    """The engine's code for ``code`` (case, ``_`` and short forms forgiven); raises
    `UnsupportedLanguage`."""
    key = code.strip().lower().replace("_", "-")
    key = _LANGUAGE_ALIASES.get(key, key)
    if key not in LANGUAGES:
        raise UnsupportedLanguage(f"language {code!r} is not supported; use one of {', '.join(LANGUAGES)}")
    return key


def voice_language(voice: str) -> str:
    """The language a voice (or a blend, by its first voice) speaks by default: its
    letter's, else American English."""
    first = re.split(r"[+(]", voice, maxsplit=1)[0].strip()
    return describe_voice(first).language or DEFAULT_LANGUAGE


@dataclass(frozen=True)
class VoiceBlend:
    """One voice or a weighted mix of voices; ``weights`` sum to 1."""

    names: tuple[str, ...]
    weights: tuple[float, ...]

    @property
    def language(self) -> str:
        return voice_language(self.names[0])

    @property
    def is_single(self) -> bool:
        return len(self.names) == 1


def _blend_error(spec: str, why: str) -> InvalidVoiceBlend:
    return InvalidVoiceBlend(
        f"voice {spec!r} is not a valid blend: {why} (write af_bella+af_sky or af_bella(2)+af_sky(1))"
    )


def _weight(spec: str, text: str | None) -> float:
    if text is None:
        return 1.0
    try:
        weight = float(text)
    except ValueError:
        raise _blend_error(spec, f"weight {text!r} is not a number") from None
    if not math.isfinite(weight) or weight <= 0:
        raise _blend_error(spec, f"weight {text!r} must be a positive number")
    return weight


def parse_voice(spec: str) -> VoiceBlend:
    """A voice name or a blend, weights normalized; every voice of a blend must share one
    language. Raises `InvalidVoiceBlend`.

    Whether each name exists is for the engine to say (it has the voice packs); this checks
    only the syntax, the weights and the languages.
    """
    if "+" not in spec and "(" not in spec:
        return VoiceBlend((spec,), (1.0,))
    parts = [_BLEND_PART.fullmatch(part) for part in spec.split("+")]
    if any(part is None for part in parts):
        raise _blend_error(spec, "each part must be a voice name with an optional (weight)")
    names = tuple(part[1] for part in parts if part is not None)
    weights = [_weight(spec, part[2]) for part in parts if part is not None]
    if len(set(names)) != len(names):
        raise _blend_error(spec, "a voice appears twice")
    languages = {voice_language(name) for name in names}
    if len(languages) > 1:
        raise _blend_error(spec, f"its voices speak different languages ({', '.join(sorted(languages))})")
    total = sum(weights)
    return VoiceBlend(names, tuple(weight / total for weight in weights))
