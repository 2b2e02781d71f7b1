"""Time to first audio under load: long blocks, pipelining, and competing sessions."""

from __future__ import annotations

import statistics
import time

from tests.server.wire import WirePeer, ws_url

from voicestream.bench.texts import BLOCK, FIRST_SENTENCE
from voicestream.bench.transport import first_audio_beside_monologues, first_audio_s


async def test_long_block_starts_as_fast_as_its_first_sentence(speech_server: str) -> None:
    assert len(BLOCK) == 267
    block, first = [], []
    for _ in range(3):  # interleaved, so that machine noise hits both alike
        first.append(await first_audio_s(ws_url(speech_server), FIRST_SENTENCE))
        block.append(await first_audio_s(ws_url(speech_server), BLOCK))
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
    idle, busy = await first_audio_beside_monologues(ws_url(speech_server), trials=3)
    idle_s, busy_s = [s.first_audio_s for s in idle], [s.first_audio_s for s in busy]
    assert statistics.median(busy_s) <= 2 * statistics.median(idle_s), (busy_s, idle_s)


async def test_sequential_session_reads_the_next_message_only_after_sending_the_previous(make_speech_server) -> None:
    """`serve --sequential` (the reference design, for `bench transport`): a cancel sent right after
    a request is read only once that request was answered, so it completes; pipelined, it is cancelled."""
    answers = {}
    for pipelined in (True, False):
        peer = await WirePeer.open(make_speech_server(pipelined=pipelined))
        await peer.send({"text": "Hello there. This request is long enough to cancel.", "request_id": "first"})
        await peer.send({"type": "cancel", "request_id": "first"})
        answers[pipelined] = (await peer.answer()).last["type"]
        await peer.close()
    assert answers == {True: "synthesis_cancelled", False: "synthesis_complete"}
