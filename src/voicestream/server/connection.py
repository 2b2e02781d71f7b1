"""The speech server's faces on the edge: a `voicestream.edge.connection.Connection` whose host
is the speech core (`SpeechCore`, which provides the edge's admission protocol) and whose
slot is its `Listener`, the connection's share of the queue for all its requests."""

from __future__ import annotations

from voicestream.edge.connection import Connection, PeerTransport
from voicestream.speech.core import SpeechCore
from voicestream.speech.job import Listener


class SpeechConnection(Connection):
    """A persistent connection of the speech server (the session, Wyoming, the context faces)."""

    def __init__(self, transport: PeerTransport, service: SpeechCore, listener: Listener) -> None:
        super().__init__(transport, service, listener)
        self.service = service
        self.listener = listener
