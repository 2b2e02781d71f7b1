"""Running the app under uvicorn: from the CLI, in a container, or in a background thread."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from voicestream.engine import KokoroEngine
from voicestream.server.app import create_app
from voicestream.server.settings import ServerSettings


def _config(settings: ServerSettings, engine: KokoroEngine | None, log_level: str) -> uvicorn.Config:
    return uvicorn.Config(
        create_app(settings, engine), host=settings.host, port=settings.port, log_level=log_level,
        ws="websockets-sansio", ws_ping_interval=20.0, ws_ping_timeout=20.0, timeout_graceful_shutdown=5,
    )


def serve(settings: ServerSettings, log_level: str = "info") -> None:
    """Run until interrupted (``voicestream serve``, the container entrypoint)."""
    uvicorn.Server(_config(settings, None, log_level)).run()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


@contextmanager
def running_server(
    engine: KokoroEngine | None = None, settings: ServerSettings | None = None, log_level: str = "warning"
) -> Iterator[str]:
    """A real server on 127.0.0.1 in a background thread; yields its base URL (tests, benchmarks, demo)."""
    settings = settings or ServerSettings(host="127.0.0.1", port=free_port())
    server = uvicorn.Server(_config(settings, engine, log_level))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), name="speech-server", daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("The speech server failed to start.")
            threading.Event().wait(0.02)
        yield f"http://{settings.host}:{settings.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
