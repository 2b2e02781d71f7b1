"""The framing bench's claim: an event split across deliveries is lost by a per-delivery parser
and recovered by the protocol layer's buffered SSE decoder, whatever the split."""

from __future__ import annotations

import random

import pytest

from voicestream.bench.framing import analyse, measure_framing, mp3_events, rechunk
from voicestream.engine import KokoroEngine


@pytest.fixture(scope="module")
def events(engine: KokoroEngine) -> list[bytes]:
    return mp3_events(engine, "Hello there. See you soon.")


@pytest.mark.parametrize("seed", range(20))
def test_buffered_decoder_recovers_every_event_and_naive_only_the_unsplit(events: list[bytes], seed: int) -> None:
    body = b"".join(events)
    deliveries = rechunk(body, (1, 400), random.Random(seed))
    result = analyse(events, deliveries)

    assert result.split_events > 0
    assert result.buffered_recovered == len(events)
    assert result.naive_recovered == len(events) - result.split_events


def test_framing_bench_runs_over_a_real_http_relay(engine: KokoroEngine) -> None:
    report = measure_framing(engine, text="Hi there.", trials=1)

    table = report.tables[0]
    measured = table.rows[1:]  # the first row quotes the reference
    assert all(row[1] >= 1 for row in measured)
    recovered = table.column("buffered decoder recovers")[1:]
    assert all(cell.split(" of ")[0] == cell.split(" of ")[1] for cell in recovered)
