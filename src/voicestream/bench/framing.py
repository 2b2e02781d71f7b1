"""``voicestream bench framing``: SSE events split across deliveries, and who reassembles them.

The agent relays audio as base64 MP3 inside JSON Server-Sent Events. TCP, proxies and the
AgentCore runtime deliver the body in chunks that need not end where an event ends, so a
reader that parses each delivery on its own loses or corrupts events. Here a real HTTP
server on 127.0.0.1 sends the agent's ``audio_chunk`` events for one spoken answer
through a relay that re-chunks the bytes at random (seeded), and a real httpx client
records every delivery as it arrives. Two readers decode the same deliveries:

- buffered: the protocol layer's :class:`~voicestream.protocol.SSEDecoder`, which keeps
  the partial event between deliveries;
- naive: each delivery split on blank lines and each ``data:`` line parsed as JSON at once.

An event counts as recovered only if its audio bytes equal what was sent.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
from bisect import bisect_left, bisect_right
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from voicestream.asgi import free_port, serving
from voicestream.audio import create_encoder
from voicestream.bench.report import Chart, Report, Table, machine_context, progress
from voicestream.bench.texts import BLOCK
from voicestream.engine import KokoroEngine, offline
from voicestream.protocol import SSEDecoder, encode_sse
from voicestream.protocol.messages import AudioChunk

DELIVERY_PAUSE_S = 0.002
"""Between two writes of the relay, so that loopback TCP does not merge them all."""


@dataclass(frozen=True)
class RechunkPlan:
    """How the relay cuts the body: delivery sizes drawn uniformly between ``low`` and ``high``
    times the mean event size (at least one byte)."""

    label: str
    low: float
    high: float

    def sizes(self, mean_event_bytes: int) -> tuple[int, int]:
        return max(1, int(self.low * mean_event_bytes)), max(1, int(self.high * mean_event_bytes))


RECHUNK_PLANS = (
    RechunkPlan("about 1.5 deliveries per event (like the reference)", 1 / 3, 1.0),
    RechunkPlan("small deliveries (1 % to 5 % of an event)", 0.01, 0.05),
    RechunkPlan("large deliveries (1 to 3 events)", 1.0, 3.0),
)


def mp3_events(engine: KokoroEngine, text: str, voice: str = "af_heart") -> list[bytes]:
    """The agent's ``audio_chunk`` events for ``text`` as MP3 48 kb/s, one per sentence, SSE-encoded."""
    encoder = create_encoder("mp3", bitrate=48_000)
    pieces = [encoder.encode(rendered.audio) for rendered in offline.stream(engine, text, voice)]
    pieces.append(encoder.finish())
    return [
        encode_sse(AudioChunk(request_id="bench", t_ms=0.0, seq=seq, data=base64.b64encode(piece).decode(), sentence=seq))
        for seq, piece in enumerate(piece for piece in pieces if piece)
    ]


def rechunk(body: bytes, sizes: tuple[int, int], rng: random.Random) -> list[bytes]:
    cuts, position = [], 0
    while position < len(body):
        size = rng.randint(*sizes)
        cuts.append(body[position : position + size])
        position += size
    return cuts


def relay_app(body: bytes) -> Starlette:
    """``GET /events?low=&high=&seed=``: ``body`` re-chunked at random, one write per piece."""

    async def relay(request: Request) -> StreamingResponse:
        low, high, seed = (int(request.query_params[name]) for name in ("low", "high", "seed"))

        async def chunks() -> AsyncIterator[bytes]:
            for chunk in rechunk(body, (low, high), random.Random(seed)):
                yield chunk
                await asyncio.sleep(DELIVERY_PAUSE_S)

        return StreamingResponse(chunks(), media_type="text/event-stream")

    return Starlette(routes=[Route("/events", relay)])


@contextmanager
def running_relay(body: bytes) -> Iterator[str]:
    config = uvicorn.Config(relay_app(body), host="127.0.0.1", port=free_port(), log_level="warning")
    with serving(config, "sse-relay") as url:
        yield url


def received_deliveries(relay_url: str, sizes: tuple[int, int], seed: int) -> list[bytes]:
    """The relay's body as the client received it, delivery by delivery."""
    params = {"low": sizes[0], "high": sizes[1], "seed": seed}
    with httpx.Client(timeout=30) as client, client.stream("GET", f"{relay_url}/events", params=params) as reply:
        return [chunk for chunk in reply.iter_raw() if chunk]


def buffered_decode(deliveries: list[bytes]) -> list[bytes]:
    decoder = SSEDecoder()
    events = [event for delivery in deliveries for event in decoder.feed(delivery)] + decoder.flush()
    return [AudioChunk.model_validate_json(event.data).audio() for event in events]


def naive_decode(deliveries: list[bytes]) -> list[bytes | None]:
    """Each delivery parsed alone: a block that does not parse is lost (None), as in a naive reader."""
    audio: list[bytes | None] = []
    for delivery in deliveries:
        for block in delivery.decode("utf-8", errors="replace").split("\n\n"):
            if not block.startswith("data: "):
                continue
            try:
                audio.append(base64.b64decode(json.loads(block[len("data: ") :])["data"], validate=True))
            except (ValueError, KeyError):
                audio.append(None)
    return audio


@dataclass(frozen=True)
class FramingResult:
    events: int
    deliveries: int
    split_events: int
    """Events whose bytes arrived in two or more deliveries."""
    mid_event_ends: int
    """Deliveries that ended inside an event."""
    buffered_recovered: int
    naive_recovered: int


def analyse(events: list[bytes], deliveries: list[bytes]) -> FramingResult:
    starts, position = [], 0
    for event in events:
        starts.append(position)
        position += len(event)
    ends = [start + len(event) for start, event in zip(starts, events, strict=True)]
    delivery_ends, position = [], 0
    for delivery in deliveries:
        position += len(delivery)
        delivery_ends.append(position)
    split = sum(bisect_right(delivery_ends, start) < bisect_left(delivery_ends, end) for start, end in zip(starts, ends, strict=True))
    event_ends = set(ends)
    mid = sum(end not in event_ends for end in delivery_ends)
    sent = [AudioChunk.model_validate_json(event[len(b"data: ") :]).audio() for event in events]
    buffered = buffered_decode(deliveries)
    naive = naive_decode(deliveries)
    return FramingResult(
        events=len(events),
        deliveries=len(deliveries),
        split_events=split,
        mid_event_ends=mid,
        buffered_recovered=sum(a == b for a, b in zip(sent, buffered, strict=False)) if len(buffered) == len(sent) else 0,
        naive_recovered=sum(audio in sent for audio in naive if audio is not None),
    )


def measure_framing(engine: KokoroEngine, text: str = BLOCK, trials: int = 5, seed: int = 1) -> Report:
    context = machine_context()
    events = mp3_events(engine, text)
    body = b"".join(events)
    table = Table(
        f"SSE relay of one MP3 answer ({len(events)} audio_chunk events, {len(body):,} bytes) re-chunked at random, "
        f"{trials} seeds per row",
        ["relay", "deliveries", "events split", "deliveries ending mid-event", "buffered decoder recovers",
         "naive decoder recovers"],
    )
    table.add("reference (4 MP3 frames)", 6, None, 2, None, None)
    results: dict[str, list[FramingResult]] = {}
    with running_relay(body) as relay_url, progress("bench framing", trials * len(RECHUNK_PLANS)) as advance:
        for plan in RECHUNK_PLANS:
            for trial in range(trials):
                deliveries = received_deliveries(relay_url, plan.sizes(len(body) // len(events)), seed + trial)
                results.setdefault(plan.label, []).append(analyse(events, deliveries))
                advance()
    for label, runs in results.items():
        total = sum(run.events for run in runs)
        table.add(
            label, sum(run.deliveries for run in runs), f"{sum(run.split_events for run in runs)} of {total}",
            sum(run.mid_event_ends for run in runs), f"{sum(run.buffered_recovered for run in runs)} of {total}",
            f"{sum(run.naive_recovered for run in runs)} of {total}",
        )
    labels: list[str | int | float] = [label.split(" (")[0] for label in results]
    chart = Chart(
        "Events recovered intact", labels,
        {"buffered (SSEDecoder)": [sum(r.buffered_recovered for r in runs) for runs in results.values()],
         "naive (per delivery)": [sum(r.naive_recovered for r in runs) for runs in results.values()],
         "sent": [sum(r.events for r in runs) for runs in results.values()]},
        "events",
    )
    return Report(
        "framing", [table], [chart],
        context={**context, "events": len(events), "body_bytes": len(body), "trials": trials, "seed": seed},
    )
