"""`ticking`: the next item or a tick, without ending the generator that is slow."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from voicestream.agent.ticking import TICK, ticking


async def test_a_slow_item_comes_after_ticks_and_the_generator_survives_them() -> None:
    gate = asyncio.Event()
    closed = asyncio.Event()

    async def items() -> AsyncGenerator[str, None]:
        try:
            yield "first"
            await gate.wait()  # a tick must not cancel this wait
            yield "second"
        finally:
            closed.set()

    seen: list[object] = []
    async for item in ticking(items(), 0.01):
        seen.append(item)
        if item is TICK and seen.count(TICK) == 3:
            gate.set()
    assert seen == ["first", TICK, TICK, TICK, "second"]
    assert closed.is_set()


async def test_closing_the_reader_cancels_the_pending_item_and_closes_the_source() -> None:
    closed = asyncio.Event()

    async def never() -> AsyncGenerator[str, None]:
        try:
            await asyncio.Event().wait()
            yield "unreachable"
        finally:
            closed.set()

    reader = ticking(never(), 0.01)
    assert await anext(reader) is TICK
    await reader.aclose()
    assert closed.is_set()
