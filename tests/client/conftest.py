"""The client tests talk to the real speech server; its first synthesis pays the model's
cold start (seconds on a CPU), which would blur every latency the tests measure."""

from __future__ import annotations

import httpx
import pytest


@pytest.fixture(scope="session")
def warm_server(speech_server: str) -> str:
    """The shared speech server's URL, after one synthesis has warmed the model up."""
    response = httpx.post(
        f"{speech_server}/invocations", json={"text": "Ready.", "format": "pcm16"}, timeout=60
    )
    response.raise_for_status()
    return speech_server
