"""Telnyx's media streaming, bidirectional in RTP mode (TeXML ``<Connect><Stream
bidirectionalMode="rtp">``): the webhook's TeXML and the stream's protocol machine.

In: ``connected``, ``start`` (``stream_id``, ``call_control_id``, ``media_format``: PCMU, PCMA
or L16), ``media`` (base64), ``mark``, ``dtmf``, ``stop``. Out: ``media`` (PCMU at 8 kHz, the
``bidirectionalCodec`` the TeXML asks for), ``mark`` and ``clear``.
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import quoteattr

from voicestream.agent.telephony.machine import JsonStream, b64, compact, field
from voicestream.protocol.telephony import Codec, Started

ENCODINGS = {"PCMU": Codec.MULAW, "PCMA": Codec.ALAW, "L16": Codec.L16}


def texml(stream_url: str) -> str:
    """The TeXML webhook's answer: connect the call to the agent's media stream, both ways."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<Response><Connect><Stream url={quoteattr(stream_url)} bidirectionalMode="rtp" '
        'bidirectionalCodec="PCMU"/></Connect></Response>'
    )


class TelnyxStream(JsonStream):
    carrier = "Telnyx"

    def started(self, event: dict[str, Any]) -> Started:
        start = event.get("start")
        codec = self.encoding(field(start, "media_format", "encoding") or "PCMU", ENCODINGS)
        rate = int(field(start, "media_format", "sample_rate") or 8000)
        call_id = field(start, "call_control_id") or event.get("stream_id") or "telnyx"
        return Started(str(call_id), codec, rate)

    def media(self, audio: bytes) -> str:
        return compact({"event": "media", "media": {"payload": b64(audio)}})

    def mark(self, name: str) -> str:
        return compact({"event": "mark", "mark": {"name": name}})

    def clear(self) -> str:
        return compact({"event": "clear"})
