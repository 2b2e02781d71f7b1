"""Server-Sent Events: encoding our events, and an incremental decoder for reading them.

The decoder follows the WHATWG HTML "event stream interpretation" rules, so it reads any
conformant server, not only ours; the one departure is documented on `SSEDecoder.flush`.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

_LINE_END = re.compile(r"\r\n|\r|\n")


def encode_sse(event: dict[str, Any] | BaseModel) -> bytes:
    """One event as `data: {json}\\n\\n`; JSON escapes newlines, so it is always one line."""
    if isinstance(event, BaseModel):
        payload = event.model_dump_json(exclude_none=True)
    else:
        payload = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return b"data: " + payload.encode("utf-8") + b"\n\n"


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event.

    `id` is the stream's last event id at dispatch time (it carries over to later events, as
    in a browser); `retry` is the reconnection time in ms if this event's block set one.
    """

    data: str
    event: str = "message"
    id: str = ""
    retry: int | None = None

    def json(self) -> Any:
        return json.loads(self.data)


class SSEDecoder:
    """Turns the bytes of an event stream, however they are split, into events."""

    def __init__(self) -> None:
        self._start_stream()

    def _start_stream(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._at_stream_start = True
        self._after_cr = False
        self._partial_line: list[str] = []
        self._data: list[str] = []
        self._event_type = ""
        self._last_event_id = ""
        self._retry: int | None = None
        self.reconnection_time_ms: int | None = None
        """The last `retry:` value of the stream, even one sent in a block without data."""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events that this chunk completes, in order."""
        return self._feed_text(self._utf8.decode(chunk))

    def flush(self) -> list[SSEEvent]:
        """End of stream: the events it completes, then the decoder is ready for a new stream.

        WHATWG discards an event not closed by a blank line. We dispatch it if its last line
        was complete (ended by a line break), because our readers take a finished HTTP body
        and would otherwise lose a final event silently; a cut-off line is still discarded.
        """
        events = self._feed_text(self._utf8.decode(b"", final=True))
        if not self._partial_line:
            events.extend(self._dispatch())
        self._start_stream()
        return events

    def _feed_text(self, text: str) -> list[SSEEvent]:
        if self._at_stream_start and text:
            self._at_stream_start = False
            text = text.removeprefix("\ufeff")
        if self._after_cr and text:
            self._after_cr = False
            text = text.removeprefix("\n")
        events: list[SSEEvent] = []
        start = 0
        for match in _LINE_END.finditer(text):
            self._partial_line.append(text[start : match.start()])
            line = "".join(self._partial_line)
            self._partial_line.clear()
            events.extend(self._process_line(line))
            start = match.end()
        if start < len(text):
            self._partial_line.append(text[start:])
        elif text.endswith("\r"):
            self._after_cr = True
        return events

    def _process_line(self, line: str) -> list[SSEEvent]:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return []
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event_type = value
        elif field == "id" and "\0" not in value:
            self._last_event_id = value
        elif field == "retry" and value.isascii() and value.isdigit():
            self._retry = self.reconnection_time_ms = int(value)
        return []

    def _dispatch(self) -> list[SSEEvent]:
        data, event_type, retry = self._data, self._event_type, self._retry
        self._data, self._event_type, self._retry = [], "", None
        if not data:
            return []
        event = SSEEvent(
            data="\n".join(data),
            event=event_type or "message",
            id=self._last_event_id,
            retry=retry,
        )
        return [event]
