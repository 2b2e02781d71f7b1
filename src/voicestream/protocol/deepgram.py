"""Deepgram's speech API (``/v1/speak``), as pydantic models: the query that picks the voice
and the audio, the socket's client messages, and what the server answers.

The shapes follow what pipecat's ``DeepgramTTSService`` / ``DeepgramHttpTTSService`` and
LiveKit's ``deepgram.TTS`` send and read (their installed source) and Deepgram's API
reference: see ``voicestream.server.faces.deepgram``. Every problem becomes a :class:`ProtocolError`.

A Deepgram model id names a voice (``aura-2-thalia-en``); each Aura voice is mapped to a
Kokoro voice of the same language and expressed gender (:data:`AURA_VOICES`; German and
Dutch ones to an English voice, :data:`ENGLISH_STAND_INS`), and Kokoro
voices and blends are accepted as they are (``af_heart``, ``af_bella+am_adam``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError

from voicestream.protocol.errors import ErrorCode, ProtocolError
from voicestream.protocol.messages import SAMPLE_RATES, InboundMessage, WireModel

DEFAULT_MODEL = "aura-asteria-en"
"""Deepgram's default model when a request names none."""

_AURA_BY_KOKORO: Mapping[str, tuple[str, ...]] = {
    "af_heart": ("asteria", "thalia", "aurora", "harmonia", "iris"),
    "af_bella": ("luna", "andromeda", "callista", "electra", "ophelia"),
    "af_nicole": ("stella", "cora", "delia", "phoebe", "selene"),
    "af_sarah": ("hera", "helena", "juno", "minerva", "vesta"),
    "af_nova": ("amalthea", "cordelia", "janus", "theia"),
    "bf_emma": ("athena", "pandora"),
    "am_michael": ("orion", "apollo", "atlas", "jupiter", "saturn"),
    "am_adam": ("arcas", "aries", "mars", "neptune"),
    "am_eric": ("perseus", "odysseus", "pluto"),
    "am_onyx": ("orpheus", "zeus", "hermes"),
    "bm_george": ("helios", "draco"),
    "bm_lewis": ("angus", "hyperion"),
    "ef_dora": ("celeste", "estrella", "carina", "diana", "selena", "agustina", "antonia", "gloria", "olivia",
                "silvia"),
    "em_alex": ("nestor", "sirio", "alvaro", "aquila", "javier", "luciano", "valerio"),
    "ff_siwis": ("agathe", "hector"),
    "if_sara": ("cinzia", "demetra", "livia", "maia", "melia"),
    "im_nicola": ("cesare", "dionisio", "elio", "flavio", "perseo"),
    "jf_alpha": ("ama", "izanami", "uzume"),
    "jm_kumo": ("ebisu", "fujin"),
}
"""Each Aura voice Deepgram lists (its voice catalog, 2026) by the Kokoro voice that speaks it:
the same language and expressed gender, but for French's Hector, spoken by Kokoro's one
French voice (a woman's): the language matters more to a listener than the voice's gender."""
_LANGUAGE_BY_LETTER = {"a": "en", "b": "en", "e": "es", "f": "fr", "i": "it", "j": "ja"}
ENGLISH_STAND_INS: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "de": {"af_heart": ("viktoria", "elara", "aurelia", "lara", "kara"), "am_michael": ("julius", "fabian")},
    "nl": {"af_heart": ("rhea", "beatrix", "daphne", "cornelia", "hestia", "leda"),
           "am_michael": ("sander", "lars", "roman")},
}
"""Aura's German and Dutch voices: Kokoro speaks neither language, so each is spoken by an
American English voice of its expressed gender (the text is read with English sounds)."""
_VOICES_BY_LANGUAGE = [
    (_LANGUAGE_BY_LETTER[kokoro[0]], kokoro, voices) for kokoro, voices in _AURA_BY_KOKORO.items()
] + [(language, kokoro, voices) for language, table in ENGLISH_STAND_INS.items() for kokoro, voices in table.items()]
AURA_VOICES: Mapping[str, str] = {
    name: kokoro
    for language, kokoro, voices in _VOICES_BY_LANGUAGE
    for voice in voices
    for name in (f"aura-{voice}-{language}", f"aura-2-{voice}-{language}")
}
"""Every Aura model id voicestream answers to, and the Kokoro voice that speaks it (both
the ``aura-`` and the ``aura-2-`` form of each name: Deepgram retired Aura-1)."""

Encoding = Literal["linear16", "mulaw", "alaw", "mp3", "opus", "flac", "aac"]
SOCKET_ENCODINGS: tuple[str, ...] = ("linear16", "mulaw", "alaw")
"""The socket streams raw audio only."""
FORMAT_BY_ENCODING: Mapping[str, str | None] = {
    "linear16": "pcm16", "mulaw": "mulaw", "alaw": None, "mp3": "mp3", "opus": "opus", "flac": "flac", "aac": "aac",
}
"""Each encoding's format among the server's encoders (``alaw`` has none: the route
builds its own encoder)."""


def kokoro_voice(model: str) -> str:
    """The Kokoro voice (or blend) a Deepgram ``model`` names; raises ``unknown_voice`` for
    an Aura name without one. A space stands for ``+`` (an unescaped ``+`` in a query)."""
    if model.startswith("aura-"):
        voice = AURA_VOICES.get(model)
        if voice is None:
            raise ProtocolError(
                ErrorCode.UNKNOWN_VOICE,
                f"model {model!r} is not an Aura voice voicestream maps to Kokoro (PROTOCOL.md lists them); "
                "name a Kokoro voice instead, e.g. model=af_heart",
            )
        return voice
    return "+".join(model.split())


_Rate = Annotated[int, Field(gt=0)]


class SpeakOptions(InboundMessage):
    """The query of ``/v1/speak``: which voice, and the audio to send it in. ``container``
    is ``none`` (raw) or ``wav`` (linear16 only; the socket's audio is always raw); REST's
    default is ``mp3`` as Deepgram's, the socket's ``linear16``. ``mip_opt_out``, ``callback`` and ``tag`` are accepted and ignored."""

    model: str = DEFAULT_MODEL
    encoding: Encoding | None = None
    container: Literal["none", "wav", "ogg"] | None = None
    sample_rate: _Rate | None = None
    bit_rate: _Rate | None = None
    speed: Annotated[float, Field(gt=0)] = 1.0

    @property
    def voice(self) -> str:
        return kokoro_voice(self.model)

    @property
    def rate(self) -> int:
        """Deepgram's default rate: 8000 Hz for G.711, 24000 Hz for the rest."""
        if self.sample_rate is not None:
            return self.sample_rate
        return 8000 if self.encoding in ("mulaw", "alaw") else 24000

    @property
    def format(self) -> str | None:
        """The server's format for this query (None: A-law, which the route encodes itself)."""
        assert self.encoding is not None
        if self.encoding == "linear16" and self.container in (None, "wav"):
            return "wav"
        return FORMAT_BY_ENCODING[self.encoding]


_QUERY_PROBLEMS: Mapping[str, tuple[ErrorCode, str]] = {
    "encoding": (ErrorCode.UNSUPPORTED_FORMAT, "encoding must be linear16, mulaw, alaw, mp3, opus, flac or aac"),
    "container": (ErrorCode.UNSUPPORTED_FORMAT, "container must be none, wav or ogg"),
    "sample_rate": (ErrorCode.UNSUPPORTED_SAMPLE_RATE, f"sample_rate must be {', '.join(map(str, SAMPLE_RATES))} (Hz)"),
    "bit_rate": (ErrorCode.UNSUPPORTED_FORMAT, "bit_rate must be a positive number of bits per second"),
    "speed": (ErrorCode.INVALID_SPEED, "speed must be a positive number"),
    "model": (ErrorCode.UNKNOWN_VOICE, "model must name an Aura voice or a Kokoro voice"),
}


def parse_speak_query(query: Mapping[str, str], *, socket: bool) -> SpeakOptions:
    """The options of one ``/v1/speak`` request or socket (``socket``: raw encodings only,
    ``linear16`` by default); raises :class:`ProtocolError` naming the bad parameter."""
    try:
        options = SpeakOptions.model_validate(dict(query))
    except ValidationError as exc:
        field = str(exc.errors(include_url=False)[0]["loc"][0])
        raise ProtocolError(*_QUERY_PROBLEMS.get(field, (ErrorCode.INVALID_MESSAGE, "bad query parameter"))) from None
    default = "linear16" if socket else "mp3"
    # The socket's audio is raw whatever the container: its pieces go out one after another,
    # and a WAV header before each would be heard as a click (Deepgram's socket sends none).
    container = "none" if socket else options.container
    options = options.model_copy(update={"encoding": options.encoding or default, "container": container})
    assert options.encoding is not None
    if socket and options.encoding not in SOCKET_ENCODINGS:
        raise ProtocolError(ErrorCode.UNSUPPORTED_FORMAT, f"the socket sends {', '.join(SOCKET_ENCODINGS)} only")
    if options.rate not in SAMPLE_RATES:
        raise ProtocolError(*_QUERY_PROBLEMS["sample_rate"])
    if options.container == "wav" and options.encoding != "linear16":
        raise ProtocolError(ErrorCode.UNSUPPORTED_FORMAT, "container=wav is for linear16; use container=none")
    kokoro_voice(options.model)  # an unknown Aura name is refused before anything starts
    return options


# --- what the client sends -------------------------------------------------------------------


class SpeakBody(InboundMessage):
    """``POST /v1/speak``'s body (Deepgram's ``url`` form is not supported)."""

    text: Annotated[str, Field(strict=True, min_length=1)]


class Speak(InboundMessage):
    type: Literal["Speak"]
    text: Annotated[str, Field(strict=True)]


class Control(InboundMessage):
    type: Literal["Flush", "Clear", "Close"]


SocketMessage = Annotated[Speak | Control, Field(discriminator="type")]
_SOCKET_MESSAGE: TypeAdapter[Speak | Control] = TypeAdapter(SocketMessage)


def parse_body(message: Mapping[str, Any]) -> SpeakBody:
    try:
        return SpeakBody.model_validate(dict(message))
    except ValidationError:
        raise ProtocolError(ErrorCode.TEXT_REQUIRED, 'the body must be {"text": "..."} with some text') from None


def parse_socket_message(message: Mapping[str, Any]) -> Speak | Control:
    """One client message: Speak, Flush, Clear or Close."""
    try:
        return _SOCKET_MESSAGE.validate_python(dict(message))
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        if error["type"] == "union_tag_invalid" or error["loc"] == ():
            raise ProtocolError(ErrorCode.INVALID_MESSAGE, "type must be Speak, Flush, Clear or Close") from None
        raise ProtocolError(ErrorCode.INVALID_MESSAGE, 'a Speak message is {"type": "Speak", "text": "..."}') from None


# --- what the server answers ---------------------------------------------------------------


class Metadata(WireModel):
    """Sent once a socket opens."""

    type: Literal["Metadata"] = "Metadata"
    request_id: str
    model_name: str
    model_version: str
    model_uuid: str


class Flushed(WireModel):
    """After the audio of all text sent before the matching Flush."""

    type: Literal["Flushed"] = "Flushed"
    sequence_id: int


class Cleared(WireModel):
    """After a Clear: no audio of the text sent before it follows."""

    type: Literal["Cleared"] = "Cleared"
    sequence_id: int


class SpeakWarning(WireModel):
    """A problem that leaves the socket open. ``warn_code`` / ``warn_msg`` are what LiveKit
    and pipecat's WebSocket client read; pipecat's SageMaker client reads ``description``."""

    type: Literal["Warning"] = "Warning"
    warn_code: str
    warn_msg: str
    description: str


class RestError(WireModel):
    """``POST /v1/speak``'s error body, Deepgram's shape."""

    err_code: str
    err_msg: str
    request_id: str
