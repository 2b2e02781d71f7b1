"""The one interface a speech session talks through, whatever carries its bytes.

A transport moves whole messages: JSON objects out, control frames and audio in. It knows
nothing about requests; `SpeechSession` does. Two carry it today: `WebSocketTransport`
(straight to the speech server) and `SageMakerTransport` (through a SageMaker endpoint's
bidirectional stream).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ControlFrame:
    """A JSON control frame of the server, decoded to a dict."""

    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class AudioFrame:
    """A piece of audio in the format the request asked for."""

    data: bytes


Frame = ControlFrame | AudioFrame


class Transport(ABC):
    """A connection to a speech server that carries one session.

    `receive` returns None once the server has ended the stream in an orderly way (a
    WebSocket close with code 1000 or 1001, the end of a SageMaker response stream) and
    raises `ConnectionLostError` when the connection broke. Whether an orderly end came
    too early is for the session to judge: only it knows what is still pending.
    """

    @abstractmethod
    async def connect(self) -> None:
        """Open the connection; raises `ConnectionLostError` when it cannot be made."""

    @abstractmethod
    async def send(self, message: Mapping[str, Any]) -> None:
        """Send one JSON object as one message."""

    @abstractmethod
    async def receive(self) -> Frame | None:
        """The next frame, or None at the end of the stream."""

    @abstractmethod
    async def close(self) -> None:
        """Close the connection; safe to call more than once."""

    def reopen(self, url: str | None = None) -> Transport:
        """A new, unconnected transport like this one (to ``url`` if given), for a session
        that resumes on another connection; transports that cannot raise NotImplementedError."""
        raise NotImplementedError(f"{type(self).__name__} cannot reconnect")


def bearer(api_key: str | None) -> dict[str, str]:
    """The header that carries a server's API key (none without a key): every client
    sends its key this way, never in a URL, which servers and proxies write to their logs."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}
