"""Time to first audio under load: long blocks, pipelining, and competing sessions."""

from __future__ import annotations

import asyncio
import statistics
import time

from tests.server.wire import WirePeer
from voicestream.bench.texts import BLOCK, FIRST_SENTENCE, MONOLOGUE

async def _time_to_first_audio(url: str, text: str) -> float:
    """Seconds from sending ``text`` on a new session to its first audio byte (the rest is cancelled)."""
    peer = await WirePeer.open(url)
    await peer.send({"text": text, "request_id": "t"})
    while not isinstance(await peer.ws.recv(), bytes):
        pass
    first_audio_at = time.monotonic()
    await peer.send({"type": "cancel"})
    await peer.close()
    return first_audio_at - peer.sent_at["t"]


async def test_long_block_starts_as_fast_as_its_first_sentence(speech_server: str) -> None:
    assert len(BLOCK) == 267
    block, first = [], []
    for _ in range(3):  # interleaved, so that machine noise hits both alike
        first.append(await _time_to_first_audio(speech_server, FIRST_SENTENCE))
        block.append(await _time_to_first_audio(speech_server, BLOCK))
    assert statistics.median(block) <= statistics.median(first) * 1.15, (block, first)


async def test_next_request_is_synthesized_while_previous_audio_is_sent(speech_server: str) -> None:
    peer = await WirePeer.open(speech_server)
    await peer.send({"text": FIRST_SENTENCE + " The listener hears it while the next one is prepared.", "request_id": "p1"})
    await peer.send({"text": "This second request was prepared in the meantime.", "request_id": "p2"})
    first = await peer.answer()
    done_at = time.monotonic()
    second = await peer.answer()
    await peer.close()
    assert first.last["type"] == second.last["type"] == "synthesis_complete"
    assert second.first_audio_at is not None
    # Rendering p2 alone takes far longer than this: it was ready when p1 finished.
    assert second.first_audio_at - done_at < 0.15
    assert second.last["elapsed_s"] < first.last["elapsed_s"] + 0.15


async def test_new_session_is_not_starved_by_long_monologues(speech_server: str) -> None:
    idle = [await _time_to_first_audio(speech_server, "Hello there.") for _ in range(3)]

    streaming = [asyncio.Event() for _ in range(3)]

    async def monologue(started: asyncio.Event) -> None:
        peer = await WirePeer.open(speech_server)
        try:
            await peer.send({"text": MONOLOGUE, "request_id": "long"})
            while True:
                if isinstance(await peer.ws.recv(), bytes):
                    started.set()
        finally:
            await peer.close()

    tasks = [asyncio.create_task(monologue(event)) for event in streaming]
    try:
        async with asyncio.timeout(120):
            for event in streaming:
                await event.wait()
        busy = []
        for _ in range(3):
            busy.append(await _time_to_first_audio(speech_server, "Hello there."))
            await asyncio.sleep(0.3)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert statistics.median(busy) <= 2 * statistics.median(idle), (busy, idle)
