"""The next item of an async generator, or a tick when it is slow to come.

Both the SSE keep-alive (a comment after ``keepalive_s`` without an event) and the speech
session's stall watch (``speech_unavailable`` after ``speech_timeout_s`` of silence) need
"the next item or a timeout". ``asyncio.timeout`` around ``anext`` would cancel the
generator and so end it; here the next item is awaited in a task of its own that outlives
the timeout, and is cancelled only when the reader stops.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator


class Tick:
    """``period_s`` passed without an item."""


TICK = Tick()


async def ticking[T](items: AsyncIterator[T], period_s: float) -> AsyncGenerator[T | Tick, None]:
    """``items`` in order, with :data:`TICK` after every ``period_s`` that brought none.
    Closing this generator closes ``items`` (when it can be closed)."""
    upcoming: asyncio.Future[T] | None = None
    try:
        while True:
            upcoming = upcoming or asyncio.ensure_future(anext(items))
            done, _ = await asyncio.wait((upcoming,), timeout=period_s)
            if not done:
                yield TICK
                continue
            try:
                item = upcoming.result()
            except StopAsyncIteration:
                return
            upcoming = None
            yield item
    finally:
        if upcoming is not None and not upcoming.done():
            upcoming.cancel()
            await asyncio.gather(upcoming, return_exceptions=True)
        aclose = getattr(items, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(RuntimeError):  # already running: its owner closes it
                await aclose()
