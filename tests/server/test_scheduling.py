"""Time to first audio under load: long blocks, pipelining, and competing sessions.

Where a time is the feature, a test compares two figures it measured in turns on the same
machine, never a figure with a fixed number of seconds; where it is not, the test asserts
what the server sent or counted."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable

import pytest
from tests.server.wire import WirePeer, metric, until_zero, ws_url

from voicestream.bench.texts import BLOCK, FIRST_SENTENCE
from voicestream.bench.transport import first_audio_s


@pytest.fixture(scope="module")
def speech_server(rendering_speech_server: str) -> str:
    """A server that renders every piece: these tests time renders (`tests.replaying`)."""
    return rendering_speech_server


@pytest.fixture
def make_speech_server(make_rendering_speech_server: Callable[..., str]) -> Callable[..., str]:
    """Extra servers that render every piece, for the same reason."""
    return make_rendering_speech_server


async def _first_words(base_url: str, text: str) -> list[str]:
    """The words of a request's first piece (asked with word timestamps); the rest is
    cancelled, and the server is idle again before this returns."""
    peer = await WirePeer.open(base_url)
    await peer.send({"text": text, "request_id": "first", "word_timestamps": True})
    async with asyncio.timeout(60):
        while (message := json.loads(await peer.ws.recv()))["type"] != "word_timestamps":
            pass
    await peer.send({"type": "cancel"})
    await peer.close()
    await until_zero(base_url, "voicestream_queue_depth", "voicestream_rendering_pieces")
    return [word["word"] for word in message["words"]]


async def test_long_block_starts_with_its_first_sentence(speech_server: str, whole_pieces) -> None:
    """A 267-character block starts as fast as its first sentence alone because its first
    audio is that sentence's first piece and nothing more: the same words, so the same
    render before it (pieces whole, so that a first piece's words are all of it; `bench
    transport` measures the times)."""
    assert len(BLOCK) == 267 and BLOCK.startswith(FIRST_SENTENCE)
    alone = await _first_words(speech_server, FIRST_SENTENCE)
    assert alone == await _first_words(speech_server, BLOCK)
    assert 0 < len(alone) <= len(FIRST_SENTENCE.split())


PREVIOUS = FIRST_SENTENCE + " It plays while the next answer is prepared."
NEXT = "Here it is."


async def _silence_between_requests(base_url: str) -> float:
    """Two requests sent at once on one session: seconds from the first one's last frame to
    the second one's first audio (measured on the client)."""
    peer = await WirePeer.open(base_url)
    await peer.send({"text": PREVIOUS, "request_id": "previous"})
    await peer.send({"text": NEXT, "request_id": "next"})
    previous = await peer.answer()
    done_at = time.monotonic()
    following = await peer.answer()
    await peer.close()
    assert previous.last["type"] == following.last["type"] == "synthesis_complete"
    assert following.first_audio_at is not None
    return following.first_audio_at - done_at


async def test_next_request_is_synthesized_while_previous_audio_is_sent(speech_server: str, make_speech_server) -> None:
    """Pipelined, the next request renders while the previous one's audio is still being
    sent, so its audio follows at once; `serve --sequential` reads it only after that and
    leaves the listener waiting for its render. Measured in turns, the silence between the
    two requests is less than half as long pipelined every time (here 2 ms against 500;
    with pipelining broken the two are alike)."""
    sequential = make_speech_server(pipelined=False)
    pipelined_s, sequential_s = [], []
    for _ in range(2):
        pipelined_s.append(await _silence_between_requests(speech_server))
        sequential_s.append(await _silence_between_requests(sequential))
    assert 2 * max(pipelined_s) < min(sequential_s), (pipelined_s, sequential_s)


MONOLOGUE = " ".join(
    f"Chapter {n} follows the travellers along the winding river, past the mills, the orchards "
    "and the old stone bridges, through the market towns where the bells ring at noon, until "
    "night falls slowly over the quiet valley and the lamps are lit one by one." for n in range(1, 9)
)
"""Long sentences, each a piece of about 12 s: a first piece that had to wait for a
monologue's piece to end would wait seconds."""


async def _speak_on(peer: WirePeer, started: asyncio.Event) -> None:
    """Read a monologue's frames for as long as it lasts; set ``started`` at its first audio."""
    while True:
        if isinstance(await peer.ws.recv(), bytes):
            started.set()


async def test_new_session_is_not_starved_by_long_monologues(speech_server: str, make_speech_server) -> None:
    """A new session beside three long monologues gets its first audio about as soon as one
    on a second server of the same process, which the monologues load as much (the same
    engine and cores) but whose workers they do not hold: first-chunk priority and the
    first-audio workers keep it from waiting for their pieces. Measured in turns, the first
    takes 1 to 2 times the second here, and about 6 times when first pieces wait for the
    monologues' workers instead."""
    apart = make_speech_server()
    peers = [await WirePeer.open(speech_server) for _ in range(3)]
    events = [asyncio.Event() for _ in peers]
    tasks = [asyncio.create_task(_speak_on(peer, event)) for peer, event in zip(peers, events, strict=True)]
    beside_s, apart_s = [], []
    try:
        for peer in peers:
            await peer.send({"text": MONOLOGUE, "request_id": "monologue"})
        async with asyncio.timeout(60):
            for event in events:
                await event.wait()
        for _ in range(3):
            apart_s.append(await first_audio_s(ws_url(apart), "Hello there."))
            beside_s.append(await first_audio_s(ws_url(speech_server), "Hello there."))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for peer in peers:
            await peer.close()
        await until_zero(speech_server, "voicestream_queue_depth", "voicestream_rendering_pieces")  # a piece being rendered is finished, then dropped
    assert statistics.median(beside_s) <= 3 * statistics.median(apart_s), (beside_s, apart_s)


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


LONG_FIRST_PIECE = (
    "The travellers walked along the quiet river past the old mills and the narrow stone bridges "
    "and the fields of barley where the farmers waved to them"
)


async def test_a_cancel_stops_the_model_run_of_its_piece_at_once(speech_server: str) -> None:
    """A request cancelled after its first audio does not render the rest of its piece: the
    model run going stops between two nodes (the server's own count, `voicestream_stopped_runs`),
    so that its cores go at once to whoever waits (a barge-in's next answer)."""
    before = await metric(speech_server, "voicestream_stopped_runs")
    peer = await WirePeer.open(speech_server)
    await peer.send({"text": LONG_FIRST_PIECE, "request_id": "long"})
    async with asyncio.timeout(60):
        while not isinstance(await peer.ws.recv(), bytes):
            pass
    await peer.send({"type": "cancel"})
    async with asyncio.timeout(60):
        while (frame := await peer.ws.recv()) and (isinstance(frame, bytes) or json.loads(frame)["type"] != "synthesis_cancelled"):
            pass
    await peer.close()
    await until_zero(speech_server, "voicestream_queue_depth", "voicestream_rendering_pieces")
    assert await metric(speech_server, "voicestream_stopped_runs") == before + 1
