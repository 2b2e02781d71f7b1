"""The Wyoming protocol (Home Assistant's voice pipeline) over the same core.

``voicestream serve --wyoming-port 10200`` listens for Wyoming on TCP beside the HTTP
routes, on the same event loop, engine and scheduler. Events (the ``wyoming`` package's
types and framing):

- ``describe`` → ``info``: one TTS program listing every voice with its language, and
  ``supports_synthesize_streaming``;
- ``synthesize``: the whole text as one ``audio-start`` / ``audio-chunk``… / ``audio-stop``
  (what a client that does not stream reads);
- ``synthesize-start``, ``synthesize-chunk``…, ``synthesize-stop``: the chunks go through
  the incremental chunker (whole sentences); each sentence's ``audio-start`` / chunks /
  ``audio-stop`` is sent as soon as it renders, then ``synthesize-stopped``. The
  ``synthesize`` Home Assistant also sends inside a stream (for older servers) is ignored.
- ``ping`` → ``pong``.

A bad event is answered with an ``error`` event and the connection goes on; an event
whose declared sizes exceed ``--max-body-bytes`` cannot be skipped safely and ends the
connection after its ``error``. The protocol is a machine without I/O (:class:`WyomingMachine`)
run by the context runner (`voicestream.server.contexts`): each utterance is a context,
answered in order (``in_order``) by the one sender, under the edge every face shares
(`voicestream.edge.connection`: send and idle timeouts, error budget, drain); this module
only frames, parses and formats. At most ``max_session_requests`` utterances wait (more are
answered ``busy``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from enum import Enum

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event, async_write_event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.ping import Ping, Pong
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
)

from voicestream.asgi import cap_send_buffer, drop_now
from voicestream.audio import ENGINE_SAMPLE_RATE
from voicestream.catalog import VoiceInfo
from voicestream.edge.connection import POLICY, PeerGone
from voicestream.protocol import DEFAULT_VOICE, ErrorCode, SpeechFault, voice_catalog
from voicestream.protocol.wyoming import (
    WyomingSynthesize,
    WyomingSynthesizeChunk,
    WyomingSynthesizeStart,
    WyomingVoice,
    parse_event_data,
)
from voicestream.server import contexts as ctx
from voicestream.server.contexts import ContextConnection
from voicestream.speech.core import Output, RequestRejected, SpeechCore, Voice

log = logging.getLogger(__name__)

ROUTE = "wyoming"
BUFFER_DELAY_S = 0.3
"""How long streamed text the chunker cannot decide yet (a sentence before the next word
arrives) waits before it is spoken as it is."""
ATTRIBUTION = Attribution(name="hexgrad (Kokoro-82M)", url="https://github.com/hexgrad/kokoro")
_STOPPED = object()
"""The marker after a stream's last sentence: ``synthesize-stopped`` goes out there."""


def wyoming_language(code: str) -> str:
    """A voice's language as Wyoming servers name them (``en-us`` → ``en_US``)."""
    language, _, region = code.partition("-")
    return f"{language}_{region.upper()}" if region else language


def info(catalog: Sequence[VoiceInfo]) -> Info:
    voices = [
        TtsVoice(name=voice.name, attribution=ATTRIBUTION, installed=True, description=voice.name,
                 version=None, languages=[wyoming_language(voice.language)] if voice.language else [])
        for voice in catalog
    ]
    program = TtsProgram(
        name="voicestream", attribution=ATTRIBUTION, installed=True, version=None,
        description="Kokoro-82M through voicestream", voices=voices, supports_synthesize_streaming=True,
    )
    return Info(tts=[program])


def choose_voice(catalog: Sequence[VoiceInfo], voice: WyomingVoice) -> str:
    """The voice a ``voice`` object names: by ``name``, else the first of its ``language``."""
    if voice.name:
        return voice.name
    language = voice.language
    if language:
        wanted = language.lower().replace("_", "-")
        languages = {info.name: info.language or "" for info in catalog}
        for match in (lambda code: code == wanted, lambda code: code.split("-")[0] == wanted.split("-")[0]):
            for voice_name, code in languages.items():
                if match(code):
                    return voice_name
        raise RequestRejected(ErrorCode.UNSUPPORTED_LANGUAGE, f"No voice speaks {language!r}.")
    return DEFAULT_VOICE


class BadEvent(SpeechFault):
    """An event that breaks the framing or the event's own shape; ``fatal`` ends the connection
    after its error (its declared sizes cannot be skipped safely)."""

    def __init__(self, message: str, fatal: bool = False) -> None:
        super().__init__(ErrorCode.INVALID_MESSAGE, message)
        self.fatal = fatal


class WyomingTransport:
    """Wyoming's framing over asyncio streams, read with the limits the HTTP routes have."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_bytes: int) -> None:
        self.reader = reader
        self.writer = writer
        self.max_bytes = max_bytes

    async def receive(self) -> Event:
        try:
            return await self._read_event()
        except (ConnectionError, asyncio.IncompleteReadError):
            raise PeerGone from None

    async def _read_event(self) -> Event:
        limit = self.max_bytes
        try:
            line = await self.reader.readline()
        except ValueError:  # a header line longer than the reader's limit
            raise BadEvent(f"An event header is longer than {limit} bytes.", fatal=True) from None
        if not line:
            raise PeerGone
        try:
            header = json.loads(line)
            if not isinstance(header, dict) or not isinstance(header.get("type"), str):
                raise TypeError
        except (ValueError, TypeError):
            raise BadEvent("An event header must be one JSON object with a type, on one line.") from None
        sizes = [header.get("data_length") or 0, header.get("payload_length") or 0]
        if any(isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= limit for size in sizes):
            raise BadEvent(f"data_length and payload_length must be whole numbers up to {limit}.", fatal=True)
        data = header.get("data") if isinstance(header.get("data"), dict) else {}
        if sizes[0]:
            try:
                extra = json.loads(await self.reader.readexactly(sizes[0]))
                if not isinstance(extra, dict):
                    raise TypeError
            except (ValueError, TypeError):
                if sizes[1]:
                    await self.reader.readexactly(sizes[1])
                raise BadEvent("An event's data must be a JSON object.") from None
            data = {**data, **extra}
        payload = await self.reader.readexactly(sizes[1]) if sizes[1] else None
        return Event(type=header["type"], data=data, payload=payload)

    async def send(self, event: Event) -> None:
        try:
            await async_write_event(event, self.writer)
        except ConnectionError:
            raise PeerGone from None

    def unsent_bytes(self) -> int | None:
        return self.writer.transport.get_write_buffer_size()

    def abort(self) -> bool:
        drop_now(self.writer.transport)
        return True

    async def close(self, code: int | None) -> None:
        """Close the stream; a peer that has gone or is closed for policy (Wyoming has no
        close codes) gets no goodbye: its unsent bytes are dropped at once."""
        if code in (None, POLICY):
            self.abort()
            return
        self.writer.close()
        try:
            await self.writer.wait_closed()
        finally:
            self.writer.transport.abort()  # a no-op once closed; else the close timed out


class _State(Enum):
    IDLE = "idle"
    """No stream open: ``synthesize`` speaks a whole text."""
    STREAMING = "streaming"
    """``synthesize-start`` opened a stream: ``synthesize-chunk`` feeds it, ``synthesize`` is ignored."""
    REFUSED = "refused"
    """``synthesize-start`` was refused: its chunks are dropped without more errors until its stop."""


_MOVES = frozenset({
    (_State.IDLE, _State.STREAMING), (_State.IDLE, _State.REFUSED),
    (_State.STREAMING, _State.IDLE), (_State.STREAMING, _State.REFUSED),  # stopped; the core refused it
    (_State.REFUSED, _State.IDLE),
})
"""The legal transitions (a new ``synthesize-start`` stops the stream before it: through IDLE)."""


_AUDIO = {"rate": ENGINE_SAMPLE_RATE, "width": 2, "channels": 1}


class WyomingMachine:
    """Wyoming's protocol without I/O (see `voicestream.server.contexts`): each utterance is a
    context answered in order (``in_order``), each sentence's audio framed by ``audio-start``
    and ``audio-stop`` (``sentences``). ``voices`` is the server's catalog (``describe``'s answer
    and the voice a language names)."""

    kind = "Wyoming connection"
    route = ROUTE
    unit = "context"

    def __init__(self, voices: Sequence[VoiceInfo]) -> None:
        self.voices = tuple(voices)
        self.state = _State.IDLE
        self.stream: str | None = None
        """The context ``synthesize-start`` opened, while it takes chunks."""
        self.utterances: set[str] = set()
        """Contexts opened and not yet ended."""
        self._count = 0

    def start(self) -> list[ctx.Command]:
        return []

    @staticmethod
    def fault_frame(fault: SpeechFault) -> Event:
        return Error(text=fault.message, code=str(fault.code)).event()

    def _move(self, to: _State) -> None:
        """The one place the state changes; an illegal transition is a bug, and raises."""
        if (self.state, to) not in _MOVES:
            raise RuntimeError(f"a Wyoming connection cannot go from {self.state.value} to {to.value}")
        self.state = to

    def receive(self, event: Event) -> list[ctx.Command]:
        if Describe.is_type(event.type):
            return [ctx.Send(info(self.voices).event())]
        if Ping.is_type(event.type):
            return [ctx.Send(Pong(text=Ping.from_event(event).text).event())]
        if Synthesize.is_type(event.type):
            if self.state is not _State.IDLE:  # what Home Assistant also sends inside a stream
                return []
            request = parse_event_data(WyomingSynthesize, event.data)
            opened = self._open(request.voice)
            context = opened.context
            return [opened, ctx.Feed(context, request.text, whole=True), ctx.End(context)]
        if SynthesizeStart.is_type(event.type):
            voice = parse_event_data(WyomingSynthesizeStart, event.data).voice
            commands = self._stop()
            try:
                opened = self._open(voice)
            except SpeechFault:
                self._move(_State.REFUSED)
                raise
            self._move(_State.STREAMING)
            self.stream = opened.context
            return [*commands, opened]
        if SynthesizeChunk.is_type(event.type):
            text = parse_event_data(WyomingSynthesizeChunk, event.data).text
            if self.state is _State.STREAMING and self.stream is not None:
                return [ctx.Feed(self.stream, text)]
            if self.state is _State.REFUSED:
                return []
            raise BadEvent("synthesize-chunk outside a stream: send synthesize-start first.")
        if SynthesizeStop.is_type(event.type):
            if self.state is _State.IDLE:
                raise BadEvent("synthesize-stop outside a stream: send synthesize-start first.")
            return self._stop()
        raise BadEvent(f"Unsupported event type {event.type!r} (this is a text-to-speech server).")

    def _open(self, voice: WyomingVoice) -> ctx.Open:
        name = choose_voice(self.voices, voice)
        self._count += 1
        context = f"wyoming-{self._count}"
        self.utterances.add(context)
        return ctx.Open(context, Voice(name, 1.0, None), Output("pcm16", ENGINE_SAMPLE_RATE), BUFFER_DELAY_S,
                        context, None, in_order=True, sentences=True)

    def _stop(self) -> list[ctx.Command]:
        """End the open stream (if any): the rest is spoken, then ``synthesize-stopped``."""
        if self.state is _State.IDLE:
            return []
        stream, self.stream = self.stream, None
        self._move(_State.IDLE)
        if stream is None:  # refused, or the core refused to open it
            return []
        return [ctx.Flush(stream, _STOPPED), ctx.End(stream)]

    def event(self, event: ctx.Event) -> list[ctx.Command]:
        if event.context not in self.utterances:
            raise ValueError(f"an event of a context the Wyoming face does not hold: {event}")
        match event:
            case ctx.Sentence(_, ended):
                return [ctx.Send(AudioStop().event() if ended else AudioStart(**_AUDIO).event())]
            case ctx.Audio(_, data):
                return [ctx.Send(AudioChunk(audio=data, **_AUDIO).event())] if data else []
            case ctx.Marked():
                return [ctx.Send(SynthesizeStopped().event())]
            case ctx.Refused(context):
                self.utterances.discard(context)
                if context == self.stream:
                    self.stream = None
                    self._move(_State.REFUSED)
                return []
            case ctx.Ended(context):
                self.utterances.discard(context)
                return []
            case ctx.Failed() | ctx.Turn():
                return []


async def serve_wyoming(
    host: str, port: int, service: Callable[[], Awaitable[SpeechCore | None]], max_line_bytes: int,
    send_buffer_bytes: int | None = None,
) -> asyncio.Server:
    """Listen for Wyoming clients; each waits for the model (``service``) before it is served.
    Each connection's kernel send buffer is ``send_buffer_bytes`` (``voicestream.asgi.cap_send_buffer``)."""

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        transport = WyomingTransport(reader, writer, max_line_bytes)
        try:
            core = await service()
            machine = WyomingMachine(voice_catalog(core.engine.voices) if core is not None else ())
            await ContextConnection.serve_face(transport, core, machine)
        except Exception:
            log.exception("a Wyoming connection failed")
            writer.transport.abort()

    server = await asyncio.start_server(connected, host, port, limit=max_line_bytes)
    for sock in server.sockets:
        cap_send_buffer(sock, send_buffer_bytes)
    return server
