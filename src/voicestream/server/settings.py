"""Server settings: one frozen object, filled from the CLI or the environment."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_HOST = "127.0.0.1"
"""Outside a container the server is reachable from this machine only; the container
entrypoint passes 0.0.0.0 explicitly."""


@dataclass(frozen=True)
class ServerSettings:
    host: str = DEFAULT_HOST
    port: int = 8080
    device: str = "cpu"
    model_dir: Path | None = None
    variant: str = "int8"
    max_sessions: int = 64
    """Open WebSocket sessions beyond this are answered ``busy`` and closed."""
    max_queue: int = 256
    """Requests waiting for synthesis (all sessions together) beyond this are answered ``busy``."""
    max_session_requests: int = 32
    """Requests one session may have accepted and not yet sent; beyond this, ``busy``. It
    also caps one session's share of ``max_queue``."""
    max_body_bytes: int = 1_048_576
    """HTTP request bodies larger than this are refused with 413 ``payload_too_large``."""
    idle_timeout_s: float = 300.0
    """A session with no message and no work for this long is closed."""
    stale_after_s: float = 60.0
    """A request whose ``request_timestamp`` is older than this is answered ``request_stale``."""
    ready_timeout_s: float = 120.0
    """How long a request waits for the model to finish loading before it is refused."""
    grace_s: float = 30.0
    """On SIGTERM: how long in-flight requests may take to finish before sessions are closed."""
    api_key: str | None = None
    """When set, every route but ``/ping`` needs it (see ``voicestream.access``)."""
    cors_origins: tuple[str, ...] = ()
    """Browser origins allowed to call the server from another site; none by default."""
    wyoming_port: int | None = None
    """Also serve the Wyoming protocol (Home Assistant) on this TCP port, same host."""
    pipelined: bool = True
    """Accept a session's next message while earlier ones are still synthesizing and sending.

    False gives the reference design's strictly sequential session (receive, synthesize,
    send, then receive again), kept so that ``voicestream bench transport`` can measure
    what pipelining buys on the same server.
    """
