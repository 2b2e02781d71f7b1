"""The events a speech session has received and its reader has not taken yet."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable


class EventInbox[T]:
    """A FIFO whose audio is bounded: the session's reader task waits for `room` before it
    reads another frame, so a caller that stops taking events stops the connection being
    read (and the server holds the rest, within its budget). Control events are few per
    request and always fit, so the session's own signals never wait."""

    def __init__(self, max_audio: int, is_audio: Callable[[T], bool]) -> None:
        if max_audio < 1:
            raise ValueError("max_audio must be at least 1")
        self._items: deque[T] = deque()
        self._max_audio = max_audio
        self._is_audio = is_audio
        self._audio = 0
        self._readable = asyncio.Event()
        self._roomy = asyncio.Event()
        self._roomy.set()

    def put_nowait(self, item: T) -> None:
        self._items.append(item)
        if self._is_audio(item):
            self._audio += 1
            if self._audio >= self._max_audio:
                self._roomy.clear()
        self._readable.set()

    async def get(self) -> T:
        while not self._items:
            self._readable.clear()
            await self._readable.wait()
        item = self._items.popleft()
        if self._is_audio(item):
            self._audio -= 1
            self._roomy.set()
        return item

    async def room(self) -> None:
        """Return once fewer than ``max_audio`` audio events are waiting."""
        await self._roomy.wait()

    def unbound(self) -> None:
        """Stop bounding the audio (the session is closing: whoever waits is not reading)."""
        self._max_audio = 1 << 62
        self._roomy.set()

    def drop(self, unwanted: Callable[[T], bool]) -> None:
        """Take out every waiting event for which ``unwanted`` is true."""
        kept = [item for item in self._items if not unwanted(item)]
        self._items = deque(kept)
        self._audio = sum(1 for item in kept if self._is_audio(item))
        if self._audio < self._max_audio:
            self._roomy.set()
