"""The wire shapes of pronunciation dictionaries and phonemes: ElevenLabs' and Cartesia's
dictionary APIs, and Kokoro-FastAPI's ``/dev/phonemize`` and ``/dev/generate_from_phonemes``.

Each parser turns a body into plain values (`Rule` tuples: grapheme, IPA or alias, whether
only its own case matches) and raises `ProtocolError` with ``invalid_message`` naming the
field; the formatters write a stored dictionary as each vendor lists it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError

from voicestream.catalog import DEFAULT_VOICE, MAX_SPEED, MIN_SPEED
from voicestream.protocol.errors import ErrorCode, ProtocolError
from voicestream.protocol.messages import InboundMessage

_Str = Annotated[str, Field(strict=True)]
_Grapheme = Annotated[str, Field(strict=True, min_length=1, max_length=100)]
MAX_RULES = 10_000

KOKORO_FASTAPI_LANGUAGES: Mapping[str, str] = {
    "a": "en-us", "b": "en-gb", "e": "es", "f": "fr-fr", "h": "hi", "i": "it", "j": "ja", "p": "pt-br", "z": "zh",
}
"""Kokoro-FastAPI's (and Kokoro's pipeline's) one-letter language codes."""


@dataclass(frozen=True)
class Rule:
    """One entry of an uploaded dictionary: ``grapheme`` said as ``ipa`` or read as ``alias``."""

    grapheme: str
    ipa: str | None
    alias: str | None
    exact_case: bool | None


class ElevenLabsRule(InboundMessage):
    """``{"type": "alias", "string_to_replace", "alias"}`` or ``{"type": "phoneme",
    "string_to_replace", "phoneme", "alphabet": "ipa"}``; ``case_sensitive`` (ElevenLabs'
    default, also when null: true) is followed, ``word_boundaries`` accepted (a word always
    matches whole)."""

    type: Literal["alias", "phoneme"]
    string_to_replace: _Grapheme
    alias: _Str | None = None
    phoneme: _Str | None = None
    alphabet: _Str = "ipa"
    case_sensitive: Annotated[bool, Field(strict=True)] | None = None
    word_boundaries: Annotated[bool, Field(strict=True)] | None = None


class ElevenLabsRules(InboundMessage):
    """The body of ``POST /v1/pronunciation-dictionaries/add-from-rules``."""

    rules: Annotated[list[ElevenLabsRule], Field(min_length=1, max_length=MAX_RULES)]
    name: Annotated[str, Field(strict=True, min_length=1)]
    description: _Str | None = None


class CartesiaItem(InboundMessage):
    """``{"text", "alias", "case_sensitive"}``: an alias between slashes (``"/kˈOkəɹO/"``) is IPA,
    any other is words read in its place."""

    text: _Grapheme
    alias: Annotated[str, Field(strict=True, min_length=1)]
    case_sensitive: Annotated[bool, Field(strict=True)] | None = None


class CartesiaDictionary(InboundMessage):
    """The body of ``POST /pronunciation-dicts/``."""

    name: Annotated[str, Field(strict=True, min_length=1)]
    items: Annotated[list[CartesiaItem], Field(max_length=MAX_RULES)] = []  # noqa: RUF012 - pydantic copies it


class PhonemizeRequest(InboundMessage):
    """Kokoro-FastAPI's ``POST /dev/phonemize``."""

    text: _Str
    language: _Str = "a"


class PhonemesRequest(InboundMessage):
    """Kokoro-FastAPI's ``POST /dev/generate_from_phonemes``."""

    phonemes: Annotated[str, Field(strict=True, min_length=1)]
    voice: _Str = DEFAULT_VOICE
    speed: Annotated[float, Field(strict=True, ge=MIN_SPEED, le=MAX_SPEED)] = 1.0


def _parse(model: type[InboundMessage], data: Mapping[str, Any], what: str) -> Any:
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_context=False, include_input=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "the body"
        raise ProtocolError(ErrorCode.INVALID_MESSAGE, f"{what}: {where}: {first['msg']}") from None


def parse_elevenlabs_rules(data: Mapping[str, Any]) -> tuple[str, str, list[Rule]]:
    """The name, description and rules of an ``add-from-rules`` body."""
    body: ElevenLabsRules = _parse(ElevenLabsRules, data, "add-from-rules")
    rules = []
    for index, rule in enumerate(body.rules):
        exact_case = rule.case_sensitive is not False
        if rule.type == "phoneme":
            if rule.alphabet.lower() != "ipa":
                raise ProtocolError(ErrorCode.INVALID_MESSAGE,
                                    f"rules.{index}: alphabet {rule.alphabet!r} is not read; write the phoneme in IPA")
            if not rule.phoneme:
                raise ProtocolError(ErrorCode.INVALID_MESSAGE, f"rules.{index}: a phoneme rule needs phoneme")
            rules.append(Rule(rule.string_to_replace, rule.phoneme, None, exact_case))
        else:
            if not rule.alias:
                raise ProtocolError(ErrorCode.INVALID_MESSAGE, f"rules.{index}: an alias rule needs alias")
            rules.append(Rule(rule.string_to_replace, None, rule.alias, exact_case))
    return body.name, body.description or "", rules


def parse_cartesia_dictionary(data: Mapping[str, Any]) -> tuple[str, list[Rule]]:
    body: CartesiaDictionary = _parse(CartesiaDictionary, data, "pronunciation dictionary")
    rules = []
    for item in body.items:
        alias = item.alias.strip()
        if len(alias) > 2 and alias.startswith("/") and alias.endswith("/"):
            rules.append(Rule(item.text, alias[1:-1], None, item.case_sensitive))
        else:
            rules.append(Rule(item.text, None, alias, item.case_sensitive))
    return body.name, rules


def parse_phonemize(data: Mapping[str, Any]) -> tuple[str, str]:
    """The text and language (a letter of `KOKORO_FASTAPI_LANGUAGES`, or any code the server
    resolves) of a ``/dev/phonemize`` body."""
    body: PhonemizeRequest = _parse(PhonemizeRequest, data, "phonemize")
    if not body.text.strip():
        raise ProtocolError(ErrorCode.TEXT_REQUIRED, "text is required and must not be blank")
    return body.text, KOKORO_FASTAPI_LANGUAGES.get(body.language.lower(), body.language)


def parse_phonemes(data: Mapping[str, Any]) -> PhonemesRequest:
    parsed: PhonemesRequest = _parse(PhonemesRequest, data, "generate_from_phonemes")
    return parsed


def phonemes_as_ssml(phonemes: str) -> str:
    """Phonemes as a text of the one text path: an SSML ``<phoneme>`` with no written word."""
    from xml.sax.saxutils import quoteattr

    return f"<speak><phoneme ph={quoteattr(phonemes)}></phoneme></speak>"


@dataclass(frozen=True)
class StoredDictionary:
    """What the formatters need of a stored dictionary."""

    id: str
    name: str
    version_id: str
    created_at: float
    description: str
    rules: Sequence[Rule]


def elevenlabs_added(dictionary: StoredDictionary) -> dict[str, Any]:
    """ElevenLabs' answer to ``add-from-file`` and ``add-from-rules``."""
    return {
        "id": dictionary.id, "name": dictionary.name, "created_by": "voicestream",
        "creation_time_unix": int(dictionary.created_at), "version_id": dictionary.version_id,
        "version_rules_num": len(dictionary.rules), "description": dictionary.description or None,
        "permission_on_resource": "admin",
    }


def elevenlabs_metadata(dictionary: StoredDictionary) -> dict[str, Any]:
    """A dictionary as ElevenLabs lists and gets it."""
    return {
        "id": dictionary.id, "latest_version_id": dictionary.version_id,
        "latest_version_rules_num": len(dictionary.rules), "name": dictionary.name,
        "permission_on_resource": "admin", "created_by": "voicestream",
        "creation_time_unix": int(dictionary.created_at), "archived_time_unix": None,
        "description": dictionary.description or None,
    }


def elevenlabs_dictionary(dictionary: StoredDictionary) -> dict[str, Any]:
    """A dictionary as ElevenLabs gets it: its metadata and its rules (IPA phonemes or aliases)."""
    rules = [
        {"string_to_replace": rule.grapheme, "case_sensitive": rule.exact_case, "word_boundaries": True,
         **({"type": "phoneme", "phoneme": rule.ipa, "alphabet": "ipa"} if rule.ipa is not None
            else {"type": "alias", "alias": rule.alias})}
        for rule in dictionary.rules
    ]
    return {**elevenlabs_metadata(dictionary), "rules": rules}


def cartesia_dictionary(dictionary: StoredDictionary) -> dict[str, Any]:
    """A dictionary as Cartesia's ``PronunciationDict``."""
    from datetime import UTC, datetime

    items = [
        {"text": rule.grapheme, "alias": f"/{rule.ipa}/" if rule.ipa is not None else rule.alias,
         **({"case_sensitive": rule.exact_case} if rule.exact_case is not None else {})}
        for rule in dictionary.rules
    ]
    created = datetime.fromtimestamp(dictionary.created_at, UTC).isoformat().replace("+00:00", "Z")
    return {"id": dictionary.id, "name": dictionary.name, "created_at": created, "items": items,
            "owner_id": "voicestream", "pinned": False}
