"""``bench transport``'s face rows: each streaming socket's first audio for a text sent word by
word, and what a second of its speech costs on the wire.

Each face is driven with its own wire messages, built from the protocol models (the shapes
its clients send), in its default audio format: the session's streamed utterance (pieces
with ``continue``), a Cartesia context (``continue: true`` per word, then ``false``), an
ElevenLabs ``multi-stream-input`` context (``" "``, the words, ``flush``, ``close_context``)
and Deepgram's ``Speak`` per word, then ``Flush``. The words go out back to back, as a fast
LLM's tokens; the server's chunker decides where to cut. Per second of speech (the audio
decoded): the audio bytes the messages carry, the messages themselves (JSON and base64
included: what a face's format costs), and every byte the client's socket received after
the handshake, as permessage-deflate (which the websockets client negotiates by default)
left them on the wire.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from websockets.asyncio.client import ClientConnection, connect

from voicestream.audio import decode_audio
from voicestream.bench.report import Advance, Table
from voicestream.bench.stats import Timings
from voicestream.protocol.cartesia import CartesiaChunk, CartesiaGeneration
from voicestream.protocol.deepgram import Control, Speak
from voicestream.protocol.elevenlabs import DEFAULT_OUTPUT_FORMAT, AudioAnswer, SocketMessage
from voicestream.protocol.messages import DEFAULT_VOICE, SynthesizePiece

CONTEXT = "bench"
UTTERANCE_TIMEOUT_S = 300.0
"""How long one utterance may take, all its audio included, before the run fails."""
"""The request or context id of every face's one utterance."""
Frame = str | bytes
Read = tuple[bytes, bool]
"""The audio a frame carries, and whether it ends the utterance."""


class FaceError(RuntimeError):
    """The face answered with an error instead of the audio."""


@dataclass(frozen=True)
class Face:
    """One streaming socket as the bench drives it."""

    label: str
    path: str
    audio: str
    """The default audio, in words (the table's column)."""
    format: str
    sample_rate: int
    messages: Callable[[list[str]], list[str]]
    """The words, as the messages that speak them (the last one ends the input)."""
    read: Callable[[Frame], Read]


def _json(frame: Frame) -> dict:
    if isinstance(frame, bytes):
        raise FaceError("a binary frame on a socket that answers in JSON")
    return json.loads(frame)


def _session_messages(words: list[str]) -> list[str]:
    pieces = [{"text": word, "request_id": CONTEXT, "continue": True} for word in words]
    pieces.append({"request_id": CONTEXT, "continue": False})
    return [SynthesizePiece.model_validate(piece).to_json() for piece in pieces]


def _session_read(frame: Frame) -> Read:
    if isinstance(frame, bytes):
        return frame, False
    message = json.loads(frame)
    if message["type"] in ("error", "synthesis_cancelled"):
        raise FaceError(frame)
    return b"", message["type"] == "synthesis_complete"


def _cartesia_messages(words: list[str]) -> list[str]:
    def generation(text: str, more: bool) -> str:
        request = {"context_id": CONTEXT, "transcript": text, "continue": more, "language": "en"}
        return CartesiaGeneration.model_validate(request).model_dump_json(by_alias=True, exclude_none=True)

    return [generation(word, True) for word in words] + [generation("", False)]


def _cartesia_read(frame: Frame) -> Read:
    message = _json(frame)
    if message["type"] == "chunk":
        return base64.b64decode(CartesiaChunk.model_validate(message).data), False
    if message["type"] == "error":
        raise FaceError(frame)
    return b"", message["type"] == "done"


def _elevenlabs_messages(words: list[str]) -> list[str]:
    messages = [
        SocketMessage(text=" ", context_id=CONTEXT),
        *(SocketMessage(text=word, context_id=CONTEXT) for word in words),
        SocketMessage(context_id=CONTEXT, flush=True),
        SocketMessage(context_id=CONTEXT, close_context=True),
    ]
    return [message.model_dump_json(exclude_defaults=True) for message in messages]


def _elevenlabs_read(frame: Frame) -> Read:
    message = _json(frame)
    if "error" in message:
        raise FaceError(frame)
    if "audio" in message:
        return base64.b64decode(AudioAnswer.model_validate(message).audio), False
    return b"", message.get("isFinal") is True


def _deepgram_messages(words: list[str]) -> list[str]:
    return [Speak(type="Speak", text=word).to_json() for word in words] + [Control(type="Flush").to_json()]


def _deepgram_read(frame: Frame) -> Read:
    if isinstance(frame, bytes):
        return frame, False
    message = json.loads(frame)
    if message["type"] == "Warning":
        raise FaceError(frame)
    return b"", message["type"] == "Flushed"


FACES = (
    Face("session", "/invocations-bidirectional-stream", "pcm16 24 kHz, binary", "pcm16", 24_000,
         _session_messages, _session_read),
    Face("Cartesia", "/tts/websocket", "pcm_s16le 24 kHz, base64 in JSON", "pcm16", 24_000,
         _cartesia_messages, _cartesia_read),
    Face("ElevenLabs", f"/v1/text-to-speech/{DEFAULT_VOICE}/multi-stream-input",
         f"{DEFAULT_OUTPUT_FORMAT}, base64 in JSON with character times", "mp3", 44_100,
         _elevenlabs_messages, _elevenlabs_read),
    Face("Deepgram", "/v1/speak", "linear16 24 kHz, binary", "pcm16", 24_000, _deepgram_messages, _deepgram_read),
)


class _CountingConnection(ClientConnection):
    """A client connection that counts the bytes its socket receives."""

    received = 0

    def data_received(self, data: bytes) -> None:
        self.received += len(data)
        super().data_received(data)


@dataclass(frozen=True)
class FaceRun:
    first_audio_s: float
    audio_bytes: int
    message_bytes: int
    wire_bytes: int
    speech_s: float


async def speak_word_by_word(base_url: str, face: Face, text: str) -> FaceRun:
    """``text`` word by word over a new socket of ``face``; its first audio and its bytes."""
    words = [word + " " for word in text.split()]
    audio = bytearray()
    first_audio_s, message_bytes = None, 0
    url = base_url.replace("http://", "ws://") + face.path
    async with connect(url, max_size=None, create_connection=_CountingConnection) as ws:
        assert isinstance(ws, _CountingConnection)
        opened = ws.received
        sent = time.monotonic()
        for message in face.messages(words):
            await ws.send(message)
        ended = False
        async with asyncio.timeout(UTTERANCE_TIMEOUT_S):
            while not ended:
                frame = await ws.recv()
                message_bytes += len(frame) if isinstance(frame, bytes) else len(frame.encode())
                data, ended = face.read(frame)
                if data and first_audio_s is None:
                    first_audio_s = time.monotonic() - sent
                audio += data
        wire = ws.received - opened
    if first_audio_s is None:
        raise FaceError(f"{face.label} ended the utterance without audio")
    samples, rate = decode_audio(bytes(audio), face.format, face.sample_rate)
    return FaceRun(first_audio_s, len(audio), message_bytes, wire, len(samples) / rate)


async def measure_faces(base_url: str, text: str, trials: int, advance: Advance) -> Table:
    """Every face ``trials`` times, interleaved so that noise hits all alike."""
    runs: dict[str, list[FaceRun]] = {face.label: [] for face in FACES}
    for _ in range(trials):
        for face in FACES:
            runs[face.label].append(await speak_word_by_word(base_url, face, text))
        advance()
    table = Table(
        f"Each streaming face: {len(text.split())} words in {len(text)} characters sent word by word "
        f"(first audio: median of {trials})",
        ["face", "route", "default audio", "first audio ms", "speech s", "audio B per s", "messages B per s",
         "on the wire B per s"],
    )
    for face in FACES:
        done = runs[face.label]
        speech_s = sum(run.speech_s for run in done)
        per_s = [sum(getattr(run, name) for run in done) / speech_s
                 for name in ("audio_bytes", "message_bytes", "wire_bytes")]
        table.add(face.label, face.path, face.audio, Timings.of([run.first_audio_s for run in done]).median_ms,
                  speech_s / trials, *per_s)
    table.note = (
        "per second of speech; messages: the frames as sent (JSON, base64); on the wire: every byte received "
        "after the handshake, with permessage-deflate as the websockets client negotiates it"
    )
    return table
