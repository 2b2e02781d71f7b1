"""What a speech session does when its connection ends before its work is done.

A server that drains for a rolling update closes its sessions with 1001; a load balancer
may drop a connection; a replica may be gone. A session with `ResumePolicy` then
reconnects (to the next of `urls`, the same address behind a balancer by default), with
bounded retries and exponential backoff, and sends again every request whose audio it has
not completely received, in the order they were submitted. A request whose audio had
partly arrived is asked for again and the part already received is skipped, so nothing is
spoken twice; that needs a raw format (``pcm16``), where a byte offset is a sample offset:
in a container format such a request fails instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

RESUMABLE_FORMATS = frozenset({"pcm16"})
"""Formats whose audio can be resumed at a byte offset (no header, no codec state)."""


@dataclass(frozen=True)
class ResumePolicy:
    """How often and where a session reconnects: ``attempts`` connections at most per loss,
    waiting ``backoff_s`` before the first and doubling up to ``max_backoff_s``."""

    attempts: int = 5
    backoff_s: float = 0.2
    max_backoff_s: float = 5.0
    urls: Sequence[str] = ()
    """Where to reconnect, tried in turn; empty: the address the session first used."""

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.backoff_s < 0 or self.max_backoff_s < self.backoff_s:
            raise ValueError("ResumePolicy needs attempts >= 1 and 0 <= backoff_s <= max_backoff_s")

    def schedule(self) -> Iterator[tuple[float, str | None]]:
        """(delay before the attempt, URL or None for the first address) for each attempt."""
        delay = self.backoff_s
        for attempt in range(self.attempts):
            yield delay, self.urls[attempt % len(self.urls)] if self.urls else None
            delay = min(self.max_backoff_s, delay * 2)
