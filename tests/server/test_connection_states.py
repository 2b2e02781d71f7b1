"""The edge's connection states are guarded in one place: OPEN -> CLOSING -> CLOSED, never back."""

from __future__ import annotations

import pytest

from voicestream.edge.connection import Connection, ConnectionState


async def test_a_connection_closes_once_and_never_opens_again() -> None:
    connection = Connection(None, None, None)  # type: ignore[arg-type]  # no I/O happens here
    assert connection.state is ConnectionState.OPEN
    connection.finish()
    connection.go_away()  # the drain may ask again: still closing
    assert connection.state is ConnectionState.CLOSING
    connection._move(ConnectionState.CLOSED)
    connection.go_away()  # a late drain of a closed connection changes nothing
    connection.finish()
    assert connection.state is ConnectionState.CLOSED
    with pytest.raises(RuntimeError, match="cannot go from closed to open"):
        connection._move(ConnectionState.OPEN)
    with pytest.raises(RuntimeError, match="cannot go from closed to closing"):
        connection._move(ConnectionState.CLOSING)
