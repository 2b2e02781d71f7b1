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
connection after its ``error``. Events are answered in order by one sender, under the edge
every face shares (`voicestream.edge.connection`: send and idle timeouts, error budget,
drain); this module only frames, parses and formats.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

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
from voicestream.edge.connection import (
    POLICY,
    PeerGone,
    PeerTransport,
    busy,
)
from voicestream.protocol import DEFAULT_VOICE, ErrorCode, SpeechFault, voice_catalog
from voicestream.protocol.wyoming import (
    WyomingSynthesize,
    WyomingSynthesizeChunk,
    WyomingSynthesizeStart,
    WyomingVoice,
    parse_event_data,
)
from voicestream.server.connection import SpeechConnection
from voicestream.speech.core import Output, RequestRejected, SpeechCore, Voice
from voicestream.speech.job import Listener
from voicestream.speech.streamed import Spoken, StreamedSpeech
from voicestream.text import STREAMED

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


def info(service: SpeechCore) -> Info:
    voices = [
        TtsVoice(name=voice.name, attribution=ATTRIBUTION, installed=True, description=voice.name,
                 version=None, languages=[wyoming_language(voice.language)] if voice.language else [])
        for voice in voice_catalog(service.engine.voices)
    ]
    program = TtsProgram(
        name="voicestream", attribution=ATTRIBUTION, installed=True, version=None,
        description="Kokoro-82M through voicestream", voices=voices, supports_synthesize_streaming=True,
    )
    return Info(tts=[program])


def choose_voice(service: SpeechCore, voice: WyomingVoice) -> str:
    """The voice a ``voice`` object names: by ``name``, else the first of its ``language``."""
    if voice.name:
        return voice.name
    language = voice.language
    if language:
        wanted = language.lower().replace("_", "-")
        languages = {info.name: info.language or "" for info in voice_catalog(service.engine.voices)}
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


class WyomingConnection(SpeechConnection):
    """One client: events are read and answered in order; each utterance's audio is sent as
    it renders. At most ``max_session_requests`` utterances wait (more are answered ``busy``)."""

    kind = "Wyoming connection"

    def __init__(self, transport: PeerTransport, service: SpeechCore, listener: Listener) -> None:
        super().__init__(transport, service, listener)
        self._stream: StreamedSpeech | None = None
        """The utterance ``synthesize-start`` opened, fed by ``synthesize-chunk``."""
        self._refused_stream = False
        """``synthesize-start`` was refused: its chunks are dropped without more errors."""
        self._count = 0
        self._utterances: list[StreamedSpeech] = []
        """Accepted and not yet sent in full (the one being sent first)."""

    @property
    def has_unsent(self) -> bool:
        """An utterance has text or audio to send: one being sent, or a stream's text still
        unspoken; an open stream waiting for more text has nothing."""
        return any(speech.has_unsent for speech in self._utterances)

    @classmethod
    def fault_frame(cls, fault: SpeechFault) -> Event:
        return Error(text=fault.message, code=str(fault.code)).event()

    async def release(self) -> None:
        for speech in self._utterances:
            speech.cancel()
        self._utterances.clear()
        self._stream = None

    async def handle(self, event: Event) -> None:
        if Describe.is_type(event.type):
            self.queue(info(self.service).event())
        elif Ping.is_type(event.type):
            self.queue(Pong(text=Ping.from_event(event).text).event())
        elif Synthesize.is_type(event.type):
            if self._stream is None and not self._refused_stream:
                request = parse_event_data(WyomingSynthesize, event.data)
                speech = self._open(request.voice)
                speech.say(request.text)
                speech.end()
                self._accept(speech)
        elif SynthesizeStart.is_type(event.type):
            self._start_stream(parse_event_data(WyomingSynthesizeStart, event.data).voice)
        elif SynthesizeChunk.is_type(event.type):
            text = parse_event_data(WyomingSynthesizeChunk, event.data).text
            if self._stream is not None:
                self._stream.feed(text)
            elif not self._refused_stream:
                raise BadEvent("synthesize-chunk outside a stream: send synthesize-start first.")
        elif SynthesizeStop.is_type(event.type):
            self._stop_stream()
        else:
            raise BadEvent(f"Unsupported event type {event.type!r} (this is a text-to-speech server).")
        self.accepted()

    def _open(self, voice_data: WyomingVoice) -> StreamedSpeech:
        limit = self.service.settings.max_session_requests
        if len(self._utterances) >= limit:
            raise busy(f"This connection already has {limit} utterances waiting to be sent; read their audio first.")
        voice = choose_voice(self.service, voice_data)
        self.service.check_voice(voice, 1.0)
        self._count += 1
        return StreamedSpeech(
            self.service, Voice(voice, 1.0, None), Output("pcm16", ENGINE_SAMPLE_RATE), self.listener, ROUTE,
            f"wyoming-{self._count}", STREAMED, BUFFER_DELAY_S,
        )

    def _accept(self, speech: StreamedSpeech) -> None:
        self._utterances.append(speech)
        self.queue_answer(speech)

    def _start_stream(self, voice_data: WyomingVoice) -> None:
        if self._stream is not None:
            self._stop_stream()
        self._refused_stream = False
        try:
            self._stream = self._open(voice_data)
        except SpeechFault:
            self._refused_stream = True
            raise
        self._accept(self._stream)

    def _stop_stream(self) -> None:
        if self._stream is None:
            if not self._refused_stream:
                raise BadEvent("synthesize-stop outside a stream: send synthesize-start first.")
            self._refused_stream = False
            return
        self._stream.flush()
        self._stream.mark(_STOPPED)
        self._stream.end()
        self._stream = None

    async def answer(self, speech: StreamedSpeech) -> None:
        """One utterance: each sentence's audio as it renders, then ``synthesize-stopped`` for a stream."""
        try:
            async for item in speech:
                if isinstance(item, Spoken):
                    await self._send_audio(item)
                else:
                    await self.send_within(SynthesizeStopped().event())
        except SpeechFault as fault:
            await self.send_fault(fault)
        finally:
            speech.cancel()  # a no-op once all of it was sent
            if speech in self._utterances:
                self._utterances.remove(speech)

    async def _send_audio(self, spoken: Spoken) -> None:
        audio = {"rate": ENGINE_SAMPLE_RATE, "width": 2, "channels": 1}
        await self.send_within(AudioStart(**audio).event())
        async for data in spoken.stream:
            await self.send_within(AudioChunk(audio=data, **audio).event())
        await self.send_within(AudioStop().event())


async def serve_wyoming(
    host: str, port: int, service: Callable[[], Awaitable[SpeechCore | None]], max_line_bytes: int,
    send_buffer_bytes: int | None = None,
) -> asyncio.Server:
    """Listen for Wyoming clients; each waits for the model (``service``) before it is served.
    Each connection's kernel send buffer is ``send_buffer_bytes`` (``voicestream.asgi.cap_send_buffer``)."""

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        transport = WyomingTransport(reader, writer, max_line_bytes)
        try:
            await WyomingConnection.serve(transport, await service())
        except Exception:
            log.exception("a Wyoming connection failed")
            writer.transport.abort()

    server = await asyncio.start_server(connected, host, port, limit=max_line_bytes)
    for sock in server.sockets:
        cap_send_buffer(sock, send_buffer_bytes)
    return server
