"""Twilio's Media Streams, bidirectional (`<Connect><Stream>`): the webhook's TwiML and the
stream's protocol machine.

In: ``connected``, ``start`` (``streamSid``, ``callSid``, ``mediaFormat``), ``media``
(base64 G.711 mu-law at 8 kHz, 20 ms a frame), ``mark`` (the name of a mark whose audio has
played, or was cleared), ``dtmf``, ``stop``. Out: ``media``, ``mark`` and ``clear``, each with
the ``streamSid``.
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import quoteattr

from voicestream.agent.telephony.machine import JsonStream, b64, compact, field, text
from voicestream.protocol.telephony import Codec, Started

ENCODINGS = {"audio/x-mulaw": Codec.MULAW}


def twiml(stream_url: str) -> str:
    """The voice webhook's answer: connect the call to the agent's media stream."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f"<Response><Connect><Stream url={quoteattr(stream_url)}/></Connect></Response>"
    )


class TwilioStream(JsonStream):
    carrier = "Twilio"

    def __init__(self) -> None:
        super().__init__()
        self.stream_sid = ""

    def started(self, event: dict[str, Any]) -> Started:
        start = event.get("start")
        self.stream_sid = text(field(start, "streamSid") or event.get("streamSid"), "a streamSid", self.carrier)
        codec = self.encoding(field(start, "mediaFormat", "encoding") or "audio/x-mulaw", ENCODINGS)
        self.rate = int(field(start, "mediaFormat", "sampleRate") or 8000)
        return Started(str(field(start, "callSid") or self.stream_sid), codec, self.rate)

    def media(self, audio: bytes) -> str:
        return compact({"event": "media", "streamSid": self.stream_sid, "media": {"payload": b64(audio)}})

    def mark(self, name: str) -> str:
        return compact({"event": "mark", "streamSid": self.stream_sid, "mark": {"name": name}})

    def clear(self) -> str:
        return compact({"event": "clear", "streamSid": self.stream_sid})
