"""The engine's idle release (`voicestream.engine.memory`): what a burst of renders took from
malloc is handed back once no model run has gone for a while, and never during a run."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
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
    """The process's anonymous resident memory (``RssAnon``): the heap, without the file pages
    (shared libraries, the model's files) the kernel may drop or read in again at any time
    (VmRSS once fell by 23 MB in a spell with no release)."""
    resident = memory.anonymous_resident_bytes()
    assert resident is not None, "/proc/self/status has no RssAnon"
    return resident


def releases_after(count: int, timeout_s: float = 30.0) -> int:
    """Bounded polling: the release count once it passes ``count``."""
    deadline = time.monotonic() + timeout_s
    while memory.IDLE_RELEASE.releases <= count:
        assert time.monotonic() < deadline, "the heap was not handed back after the engine went idle"
        time.sleep(0.02)
    return memory.IDLE_RELEASE.releases


def ran_at_once(engine: KokoroEngine) -> object:
    """A session, or a front and vocoder pair, of ``engine`` that had runs at once."""
    pairs = [pair for pair in engine._split_models.values() if any(map(memory.IDLE_RELEASE.ran_at_once, pair.sessions))]
    sessions = [session for session in engine._sessions.values() if memory.IDLE_RELEASE.ran_at_once(session)]
    assert pairs or sessions, "no session had runs at once"
    return (sessions + pairs)[0]


def settled(timeout_s: float = 30.0) -> int:
    """Bounded polling: the release count once nothing is left to release or renew."""
    deadline = time.monotonic() + timeout_s
    while not memory.IDLE_RELEASE.settled:
        assert time.monotonic() < deadline, "the idle release did not settle"
        time.sleep(0.02)
    return memory.IDLE_RELEASE.releases


@pytest.fixture
def quick_release() -> Iterator[memory.IdleRelease]:
    release = memory.IDLE_RELEASE
    saved = release.after_s, release.renew_after_s
    release.after_s, release.renew_after_s = QUIET_S, 2 * QUIET_S
    yield release
    release.after_s, release.renew_after_s = saved


def test_the_heap_is_given_back_after_a_burst_of_renders(engine: KokoroEngine, quick_release: memory.IdleRelease) -> None:
    """Four threads render a sentence each at once (each allocates from its own malloc arena).
    Held while a run goes on, twice as long as the release's quiet spell, the anonymous
    resident set (malloc's heap; file pages come and go with the page cache) stays where the
    burst left it; once the engine is idle, the release hands pages back. Two figures from
    the same test, not a share of the growth: how much of what a burst grows is still live
    differs from run to run and machine to machine (five runs here: 28 to 68 MB of 119 to
    157 MB came back, 0.0 MB in the spell without a release; CI's machine once gave back 27
    of 152 MB, where a quarter was asked). With a release that does nothing, none came back
    (0 of 60 MB): the freed chunks stay in their arenas."""
    count = quick_release.releases
    engine.render(next(engine.plan("Settle.")), "af_heart", 1.0)
    releases_after(count)  # quiet and released: nothing more is given back until something runs
    before = resident_bytes()
    with quick_release.running():  # the burst and the spell after it are one run: no release
        releases = quick_release.releases
        with ThreadPoolExecutor(len(SENTENCES)) as pool:
            list(pool.map(lambda text: engine.synthesize(text, "af_heart"), SENTENCES))
        after_burst = resident_bytes()
        time.sleep(QUIET_S * 2)  # the control: a spell twice the release's, with no release
        held = resident_bytes()
        assert quick_release.releases == releases
    releases_after(releases)
    released = resident_bytes()
    grown, without, given_back = after_burst - before, after_burst - held, held - released
    mb = 2**20
    report = (
        f"burst +{grown / mb:.0f} MB; the spell without a release gave back {without / mb:.1f} MB, "
        f"the release {given_back / mb:.1f} MB"
    )
    assert grown > 20 * mb, f"{report}: nothing to measure"
    assert given_back >= 8 * mb, report
    assert given_back >= 4 * max(without, mb), report


def test_sessions_built_again_give_back_what_runs_at_once_kept(engine: KokoroEngine, quick_release: memory.IdleRelease) -> None:
    """Five threads render at once; a release alone leaves what the sessions keep from those
    runs (measured on one engine: 116 MB that malloc_trim could not reach). A second quiet
    spell, with renewal asked for, builds every session again and gives it back, and the
    renewed engine renders the same samples. Only sessions that had runs at once are rebuilt.
    Two figures of the same test: the release
    without renewal, then with it (with a renewal that builds nothing, nothing comes back
    and the renewal count stays). A replaced session that something still holds (a parked
    request in the middle of a piece) brings one more release when it is let go, though no
    model run asks for one."""
    piece = next(engine.plan("The meeting has moved to Thursday afternoon.", cut_first_clause=False))
    reference = engine.render(piece, "af_heart", 1.0)
    saved = quick_release.renew_above
    quick_release.renew_above = float("inf")  # the first spell releases the heap, renews nothing
    try:
        count = quick_release.releases
        texts = (*SENTENCES, "Please remember to bring your umbrella this afternoon.")
        with ThreadPoolExecutor(len(texts)) as pool:
            list(pool.map(lambda text: engine.synthesize(text, "af_heart"), texts))
        count = releases_after(count)
        released = resident_bytes()
        renewals = quick_release.renewals, engine.renewals
        quick_release.renew_above = 1e-6  # the next spell renews whatever the heap holds
        held = ran_at_once(engine)  # as a parked request's generator would hold it
        with quick_release.running():
            pass
        releases_after(count)
        count = settled()  # the renewal, and the release the sessions it freed at once asked for
        assert held not in [*engine._sessions.values(), *engine._split_models.values()]
        time.sleep(QUIET_S * 3)
        assert quick_release.releases == count  # nothing ran and nothing was let go since
        del held
        releases_after(count)  # the replaced pair, let go, asks for a release of its own
        renewed = resident_bytes()
    finally:
        quick_release.renew_above = saved
    mb = 2**20
    report = f"after the release {released / mb:.0f} MB, after the renewal {renewed / mb:.0f} MB"
    assert (quick_release.renewals, engine.renewals) == (renewals[0] + 1, renewals[1] + 1), report
    assert released - renewed >= 20 * mb, report
    assert np.array_equal(engine.render(piece, "af_heart", 1.0), reference)


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


def test_renewal_off_renews_nothing(engine: KokoroEngine, quick_release: memory.IdleRelease) -> None:
    """``VOICESTREAM_RENEW_ABOVE=0``: a quiet spell after runs at once releases the heap and
    builds no session again, however much the heap holds."""
    saved = quick_release.renew_above
    quick_release.renew_above = 0.0
    try:
        count, renewals = quick_release.releases, engine.renewals
        session = engine._sessions[1]
        with quick_release.running(session), quick_release.running(session):  # two runs at once
            pass
        releases_after(count)
    finally:
        quick_release.renew_above = saved
    assert engine.renewals == renewals


def test_a_session_that_cannot_be_built_again_is_logged_once_and_the_loaded_ones_kept(
    engine: KokoroEngine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The graph cache's files gone under a running server: the renewal fails once, logged with
    its traceback, the engine keeps the sessions it has and tries no more."""
    from voicestream.engine.graph import ModelGraph

    graph = engine._renewable_graph
    assert graph is not None
    sessions = dict(engine._sessions)
    with memory.IDLE_RELEASE.running(sessions[1]), memory.IDLE_RELEASE.running(sessions[1]):
        pass  # two runs at once: the session is one to renew
    monkeypatch.setattr(engine, "_renewable_graph", ModelGraph("/nonexistent/model.onnx", graph.durations, graph.split))
    assert engine.renew_sessions(lambda: True) is False
    assert engine.renew_sessions(lambda: True) is False
    assert caplog.text.count("could not build the model sessions again") == 1
    assert engine._sessions == sessions
