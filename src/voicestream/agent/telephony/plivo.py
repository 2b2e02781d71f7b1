"""Plivo's audio streams, bidirectional (``<Stream bidirectional="true">``): the answer
URL's XML and the stream's protocol machine.

In: ``start`` (``streamId``, ``callId``, ``mediaFormat``), ``media`` (base64 mu-law at 8 kHz,
or L16), ``playedStream`` (a checkpoint's audio has played), ``clearedAudio``, ``dtmf``,
``stop``. Out: ``playAudio`` (mu-law at 8 kHz), ``checkpoint`` and ``clearAudio``, each with
the ``streamId``.
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape

from voicestream.agent.telephony.machine import JsonStream, b64, compact, field, text
from voicestream.protocol.telephony import Codec, Started

ENCODINGS = {"audio/x-mulaw": Codec.MULAW, "audio/x-l16": Codec.L16}


def plivo_xml(stream_url: str) -> str:
    """The answer URL's XML: stream the call to the agent, both ways, for the whole call."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<Response><Stream bidirectional="true" keepCallAlive="true" '
        f'contentType="audio/x-mulaw;rate=8000">{escape(stream_url)}</Stream></Response>'
    )


class PlivoStream(JsonStream):
    carrier = "Plivo"
    played_event = "playedStream"

    def __init__(self) -> None:
        super().__init__()
        self.stream_id = ""

    def started(self, event: dict[str, Any]) -> Started:
        start = event.get("start")
        self.stream_id = text(field(start, "streamId") or event.get("streamId"), "a streamId", self.carrier)
        encoding = str(field(start, "mediaFormat", "encoding") or "audio/x-mulaw").split(";")[0]
        rate = int(field(start, "mediaFormat", "sampleRate") or 8000)
        return Started(str(field(start, "callId") or self.stream_id), self.encoding(encoding, ENCODINGS), rate)

    def played_name(self, event: dict[str, Any]) -> Any:
        return event.get("name")

    def media(self, audio: bytes) -> str:
        media = {"contentType": "audio/x-mulaw", "sampleRate": 8000, "payload": b64(audio)}
        return compact({"event": "playAudio", "media": media, "streamId": self.stream_id})

    def mark(self, name: str) -> str:
        return compact({"event": "checkpoint", "streamId": self.stream_id, "name": name})

    def clear(self) -> str:
        return compact({"event": "clearAudio", "streamId": self.stream_id})
