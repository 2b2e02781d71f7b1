"""Running the app under uvicorn: from the CLI, in a container, or in a background thread."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from voicestream.asgi import CONNECTION_PROTOCOLS, free_port, serving
from voicestream.edge.drain import UVICORN_SHUTDOWN_S, DrainingServer
from voicestream.engine import KokoroEngine
from voicestream.server.app import create_app
from voicestream.speech.settings import ServerSettings


def _config(settings: ServerSettings, engine: KokoroEngine | None, log_level: str) -> uvicorn.Config:
    """uvicorn's settings; ``log_config=None`` leaves logging to ``voicestream.logs``."""
    return uvicorn.Config(
        create_app(settings, engine), host=settings.host, port=settings.port, log_level=log_level,
        **CONNECTION_PROTOCOLS, ws_ping_interval=20.0, ws_ping_timeout=20.0,
        timeout_graceful_shutdown=UVICORN_SHUTDOWN_S, ws_max_size=settings.max_body_bytes, log_config=None,
    )


def serve(settings: ServerSettings, log_level: str = "info") -> None:
    """Run until SIGTERM or Ctrl-C, then drain and exit within ``voicestream.edge.drain``'s
    deadline (``voicestream serve``, the container entrypoint). Logging is set up by the
    caller (``voicestream.logs``)."""
    config = _config(settings, None, log_level)
    drain = config.app.state.server.drain
    DrainingServer(config, drain, settings.grace_s, send_buffer_bytes=settings.send_buffer_bytes).run()


@contextmanager
def running_server(
    engine: KokoroEngine | None = None, settings: ServerSettings | None = None, log_level: str = "warning"
) -> Iterator[str]:
    """A real server on 127.0.0.1 in a background thread; yields its base URL (tests, benchmarks, demo)."""
    settings = settings or ServerSettings(host="127.0.0.1", port=free_port())
    with serving(_config(settings, engine, log_level), "speech-server", settings.send_buffer_bytes) as url:
        yield url
