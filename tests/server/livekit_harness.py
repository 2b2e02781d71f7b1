"""LiveKit's own TTS plugins, driven as ``AgentSession`` drives them: what the face tests run
through a LiveKit client (Cartesia, ElevenLabs, Deepgram)."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.server.wire import metric

ANSWER = "The first sentence arrives token by token. Then a second one follows it. The end."


async def stream_then_synthesize(tts: Any, base_url: str, requests: str, text: str) -> None:
    """``tts.stream()`` speaks before its input ends (audio comes while the last third of the
    tokens is still unsent) and says the whole answer; ``tts.synthesize(text)`` is one request
    of the server's ``requests`` counter and at least a second of audio."""
    stream = tts.stream()
    tokens = ANSWER.replace(" ", " \0").split("\0")
    first, rest = tokens[: len(tokens) * 2 // 3], tokens[len(tokens) * 2 // 3 :]
    for token in first:
        stream.push_text(token)
    events = stream.__aiter__()
    heard = await asyncio.wait_for(events.__anext__(), 120)  # the input is still open
    assert heard.frame.samples_per_channel > 0
    for token in rest:
        stream.push_text(token)
    stream.end_input()
    seconds = heard.frame.duration + sum([event.frame.duration async for event in events])
    await stream.aclose()
    assert seconds > 2.0

    before = await metric(base_url, requests)
    frames = [event.frame async for event in tts.synthesize(text)]
    assert sum(frame.duration for frame in frames) > 1.0
    assert await metric(base_url, requests) == before + 1
    await tts.aclose()
