"""The engine's idle release (`voicestream.engine.memory`): what a burst of renders took from
malloc is handed back once no model run has gone for a while, and never during a run."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from voicestream.engine import KokoroEngine, memory

pytestmark = pytest.mark.skipif(memory._glibc() is None, reason="the heap is handed back through glibc's malloc_trim")

SENTENCES = (
    "Kokoro is a small model that runs on a laptop.",
    "The meeting has moved to Thursday afternoon.",
    "The listener should hear the first words soon.",
    "They pass the mills and the old stone bridges.",
)
"""Four short sentences, one model run each: enough for each thread's malloc arena to grow by
tens of megabytes (a longer text only costs more renders to show the same release)."""
QUIET_S = 0.2
"""The idle spell these tests wait for before a release (the server's is a second)."""


def resident_bytes() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) * 1024


def releases_after(count: int, timeout_s: float = 30.0) -> int:
    """Bounded polling: the release count once it passes ``count``."""
    deadline = time.monotonic() + timeout_s
    while memory.IDLE_RELEASE.releases <= count:
        assert time.monotonic() < deadline, "the heap was not handed back after the engine went idle"
        time.sleep(0.02)
    return memory.IDLE_RELEASE.releases


@pytest.fixture
def quick_release() -> Iterator[memory.IdleRelease]:
    release, saved = memory.IDLE_RELEASE, memory.IDLE_RELEASE.after_s
    release.after_s = QUIET_S
    yield release
    release.after_s = saved


def test_the_heap_is_given_back_after_a_burst_of_renders(engine: KokoroEngine, quick_release: memory.IdleRelease) -> None:
    """Four threads render a sentence each at once (each allocates from its own malloc arena);
    once the engine is idle, at least a quarter of what the burst added to the resident set
    goes back (measured here: 74 of 178 MB). With a release that does nothing, none did
    (0 of 60 MB): the freed chunks stay in their arenas."""
    count = quick_release.releases
    engine.render(next(engine.plan("Settle.")), "af_heart", 1.0)
    releases_after(count)  # quiet and released: nothing more is given back until something runs
    before = resident_bytes()
    with quick_release.running():  # the burst is one spell: no release inside it
        releases = quick_release.releases
        with ThreadPoolExecutor(len(SENTENCES)) as pool:
            list(pool.map(lambda text: engine.synthesize(text, "af_heart"), SENTENCES))
        after_burst = resident_bytes()
    releases_after(releases)
    released = resident_bytes()
    grown = after_burst - before
    assert grown > 20 * 2**20, f"the burst grew the resident set by only {grown / 2**20:.0f} MB: nothing to measure"
    assert after_burst - released >= grown / 4, (
        f"burst +{grown / 2**20:.0f} MB, given back {(after_burst - released) / 2**20:.0f} MB"
    )


def test_no_release_while_a_run_goes_on(quick_release: memory.IdleRelease) -> None:
    """A release waits for the last run to end and then for a quiet spell: a stream of pieces
    never waits for one. One release per spell, however long it lasts."""
    count = quick_release.releases
    with quick_release.running():
        pass
    count = releases_after(count)
    with quick_release.running():
        time.sleep(QUIET_S * 3)  # longer than the spell, but a run is going on
        assert quick_release.releases == count
    count = releases_after(count)
    time.sleep(QUIET_S * 3)
    assert quick_release.releases == count  # nothing ran since: nothing more to give back


def test_a_release_delay_that_is_not_a_number_falls_back_to_the_default(monkeypatch, caplog) -> None:
    from voicestream.engine.memory import (
        DEFAULT_RELEASE_AFTER_S,
        RELEASE_AFTER_ENV,
        _release_after_s,
    )

    monkeypatch.setenv(RELEASE_AFTER_ENV, "one second")
    assert _release_after_s() == DEFAULT_RELEASE_AFTER_S
    assert "is not a number" in caplog.text
    monkeypatch.setenv(RELEASE_AFTER_ENV, "0")
    assert _release_after_s() == 0.0
