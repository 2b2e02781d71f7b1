"""An ASGI app served by uvicorn in a background thread, for tests, benchmarks and the demo.

Shared by the speech server and the agent, which must not import each other.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


@contextmanager
def serving(config: uvicorn.Config, name: str) -> Iterator[str]:
    """Run ``config``'s app until the block ends; yields its base URL once it listens."""
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError(f"{name} failed to start")
            threading.Event().wait(0.02)
        yield f"http://{config.host}:{config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
