"""Progress bars for long work (weight preparation, long renders), shown on stderr."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)

if TYPE_CHECKING:  # the engine is an extra: the agent's CLI runs without it
    from voicestream.engine.weights import Progress as ProgressCallback

stderr = Console(stderr=True)


@contextmanager
def weights_progress() -> Iterator[ProgressCallback]:
    """Yield a callback for :func:`voicestream.engine.resolve_weights` that drives one bar per step.

    The bars appear only once there is work to show: cached weights print nothing.
    """
    tasks: dict[str, TaskID] = {}
    bars = Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn(), console=stderr
    )

    def update(description: str, done: int, total: int) -> None:
        if not tasks:
            bars.start()
        if description not in tasks:
            tasks[description] = bars.add_task(description, total=total)
        bars.update(tasks[description], completed=done, total=total)

    try:
        yield update
    finally:
        if tasks:
            bars.stop()


LONG_TEXT_CHARS = 2_000
"""Texts shorter than this render in seconds: no bar."""


@contextmanager
def text_progress(total_chars: int) -> Iterator[Callable[[int], None]]:
    """Yield a callback that advances a bar by the characters rendered (long texts only)."""
    if total_chars < LONG_TEXT_CHARS:
        yield lambda _chars: None
        return
    bars = Progress(
        TextColumn("Speaking"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,} characters"),
        TimeRemainingColumn(), console=stderr,
    )
    with bars:
        task = bars.add_task("Speaking", total=total_chars)
        yield lambda chars: bars.advance(task, chars)
