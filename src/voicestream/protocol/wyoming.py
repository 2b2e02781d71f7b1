"""The data of Wyoming's text-to-speech events, as pydantic models.

The ``wyoming`` package frames events (a JSON header line, then its ``data`` and its
``payload``) and names their types; what a server must check is the ``data`` a client puts
in them: ``synthesize`` and ``synthesize-chunk`` carry ``text``, ``synthesize`` and
``synthesize-start`` a ``voice`` (``name``, ``language``, ``speaker``). Each problem becomes a
:class:`ProtocolError` with ``invalid_message``, which the server answers with an ``error``
event before it goes on.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationError
from pydantic_core import PydanticCustomError

from voicestream.protocol.errors import ErrorCode, ProtocolError
from voicestream.protocol.messages import InboundMessage

_Str = Annotated[str, Field(strict=True)]


def _words(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("blank", "must not be blank")
    return value


class WyomingVoice(InboundMessage):
    """Which voice: by ``name``, else the first voice of ``language`` (Home Assistant sends
    either); ``speaker`` is accepted and ignored (a Kokoro voice has one)."""

    name: _Str | None = None
    language: _Str | None = None
    speaker: _Str | None = None


class WyomingSynthesize(InboundMessage):
    """``synthesize``: the whole text (at least one character that is not a space)."""

    text: Annotated[_Str, AfterValidator(_words)]
    voice: WyomingVoice = WyomingVoice()


class WyomingSynthesizeStart(InboundMessage):
    """``synthesize-start``: a stream of text pieces follows."""

    voice: WyomingVoice = WyomingVoice()


class WyomingSynthesizeChunk(InboundMessage):
    """``synthesize-chunk``: a piece of the stream's text (may be only spaces)."""

    text: _Str


_PROBLEMS = {
    WyomingSynthesize: "text must be a string with words to speak.",
    WyomingSynthesizeChunk: "text must be a string.",
}


def parse_event_data[M: InboundMessage](model: type[M], data: dict[str, Any]) -> M:
    """An event's data as ``model``; raises :class:`ProtocolError` (``invalid_message``)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        field = str(exc.errors(include_url=False)[0]["loc"][0])
        if field == "voice":
            message = "voice must be an object with a name or a language (strings)."
        else:
            message = _PROBLEMS.get(model, "the event's data does not follow Wyoming.")
        raise ProtocolError(ErrorCode.INVALID_MESSAGE, message) from None
