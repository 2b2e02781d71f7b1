"""Shared by the phone-call tests (the stand-in carriers themselves are
`voicestream.bench.carrier`, which `bench telephony` measures a call through)."""

from __future__ import annotations

import asyncio
from typing import Any


async def until(condition: Any, timeout_s: float, what: str) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.02)
