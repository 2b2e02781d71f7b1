"""Server settings: one frozen object, filled from the CLI or the environment."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ServerSettings:
    host: str = "0.0.0.0"
    port: int = 8080
    device: str = "cpu"
    model_dir: Path | None = None
    variant: str = "int8"
    max_sessions: int = 64
    """Open WebSocket sessions beyond this are answered ``busy`` and closed."""
    max_queue: int = 256
    """Requests waiting for synthesis (all sessions together) beyond this are answered ``busy``."""
    idle_timeout_s: float = 300.0
    """A session with no message and no work for this long is closed."""
    stale_after_s: float = 60.0
    """A request whose ``request_timestamp`` is older than this is answered ``request_stale``."""
    ready_timeout_s: float = 120.0
    """How long a request waits for the model to finish loading before it is refused."""
