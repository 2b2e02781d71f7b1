"""The engine's idle release (`voicestream.engine.memory`): what a burst of renders took from
malloc is handed back once no model run has gone for a while, and never during a run."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.engine.memory_burst import QUIET_S, releases_after

from voicestream.engine import KokoroEngine, memory

pytestmark = pytest.mark.skipif(memory._glibc() is None, reason="the heap is handed back through glibc's malloc_trim")


@pytest.fixture
def quick_release(engine: KokoroEngine) -> Iterator[memory.IdleRelease]:
    """The test engine's own idle release (it made one: no server handed it one), its spells short."""
    release = engine.idle_release
    saved = release.after_s, release.renew_after_s
    release.after_s, release.renew_after_s = QUIET_S, 2 * QUIET_S
    yield release
    release.after_s, release.renew_after_s = saved


@pytest.fixture(scope="module")
def bursts() -> dict[str, dict[str, Any]]:
    """`tests.engine.memory_burst`'s figures, from a process of its own: what the resident set
    shows of a burst must not depend on what the test worker did before (see its docstring)."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.engine.memory_burst"], check=False, capture_output=True, text=True, timeout=300,
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_heap_is_given_back_after_a_burst_of_renders(bursts: dict[str, dict[str, Any]]) -> None:
    """Four threads render a sentence each at once (each allocates from its own malloc arena).
    Held while a run goes on, twice as long as the release's quiet spell, the anonymous
    resident set (malloc's heap; file pages come and go with the page cache) stays where the
    burst left it, and no release comes; once the engine is idle, the release hands pages
    back. Two figures from the same process, not a share of the growth: how much of what a
    burst grows is still live differs from run to run and machine to machine (five runs
    here: 28 to 68 MB of 119 to 157 MB came back, 0.0 MB in the spell without a release). With
    a release that does nothing, none came back (0 of 60 MB): the freed chunks stay in their
    arenas."""
    heap = bursts["heap"]
    report = (
        f"burst +{heap['grown']:.0f} MB; the spell without a release gave back {heap['without']:.1f} MB, "
        f"the release {heap['given_back']:.1f} MB"
    )
    assert heap["releases_in_control"] == 0, report
    assert heap["grown"] > 20, f"{report}: nothing to measure"
    assert heap["given_back"] >= 8, report
    assert heap["given_back"] >= 4 * max(heap["without"], 1), report


def test_sessions_built_again_give_back_what_runs_at_once_kept(bursts: dict[str, dict[str, Any]]) -> None:
    """Five threads render at once; a release alone leaves what the sessions keep from those
    runs (measured on one engine: 116 MB that malloc_trim could not reach), and a second spell
    and release without renewal gives back nothing more (the control). A spell with renewal
    asked for builds every session that had runs at once again and gives that back (25 to
    140 MB in 13 runs of the process, three of them at once; the control 0.0 MB in each), and
    the renewed engine renders the same samples. With a renewal that builds nothing, nothing comes back and the renewal count
    stays. A replaced session that something still holds (a parked request in the middle of
    a piece) brings one more release when it is let go, though no model run asks for one."""
    renewal = bursts["renewal"]
    report = f"the control gave back {renewal['control']:.1f} MB, the renewal {renewal['given_back']:.1f} MB"
    assert renewal["renewals"] == [1, 1], report
    assert renewal["held_replaced"] and renewal["releases_while_held"] == 0, report
    assert renewal["given_back"] >= 8, report
    assert renewal["given_back"] >= 4 * max(renewal["control"], 1), report
    assert renewal["same_samples"]


def test_no_release_while_a_run_goes_on(quick_release: memory.IdleRelease) -> None:
    """A release waits for the last run to end and then for a quiet spell: a stream of pieces
    never waits for one. One release per spell, however long it lasts: a second one comes only
    if something in this process asked for it after this test's run ended (the test worker's
    other threads may: a clean clone once saw 40 releases against 39, from another test's
    run or a freed session, `IdleRelease.asked`)."""
    count = quick_release.releases
    with quick_release.running():
        pass
    count = releases_after(quick_release, count)
    with quick_release.running():
        time.sleep(QUIET_S * 3)  # longer than the spell, but a run is going on
        assert quick_release.releases == count
    asked = quick_release.asked  # this test's runs are over: any later reason is another's
    count = releases_after(quick_release, count)
    time.sleep(QUIET_S * 3)
    assert quick_release.releases == count or quick_release.asked > asked, "a release no run asked for"


def test_a_release_delay_that_is_not_a_number_falls_back_to_the_default(monkeypatch, caplog) -> None:
    """The server reads ``VOICESTREAM_RELEASE_AFTER_S`` into its settings, which make the idle
    release of the engine it loads: a typo is logged, not fatal."""
    from voicestream.speech.settings import RELEASE_AFTER_ENV, RENEW_ABOVE_ENV, ServerSettings

    monkeypatch.setenv(RELEASE_AFTER_ENV, "one second")
    assert ServerSettings().release_after_s == memory.DEFAULT_RELEASE_AFTER_S
    assert "is not a number" in caplog.text
    monkeypatch.setenv(RELEASE_AFTER_ENV, "0")
    monkeypatch.setenv(RENEW_ABOVE_ENV, "0")
    assert (ServerSettings().release_after_s, ServerSettings().renew_above) == (0.0, 0.0)


async def test_a_server_hands_the_engine_it_loads_the_release_its_settings_make(
    engine: KokoroEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine reads no environment: a server loading its own model makes the idle release
    from its settings (``VOICESTREAM_RELEASE_AFTER_S``, ``VOICESTREAM_RENEW_ABOVE``) and hands
    it to that engine, which counts its runs there and reports them in /metrics."""
    from voicestream.server import ServerSettings, create_app
    from voicestream.speech.settings import RELEASE_AFTER_ENV, RENEW_ABOVE_ENV

    monkeypatch.setenv(RELEASE_AFTER_ENV, "0.25")
    monkeypatch.setenv(RENEW_ABOVE_ENV, "0")
    app = create_app(ServerSettings(model_dir=engine.files.model_path.parent))
    async with app.router.lifespan_context(app):
        service = await app.state.server.wait()
        assert service is not None
        release = service.engine.idle_release
        assert (release.after_s, release.renew_above) == (0.25, 0.0) and release is not engine.idle_release
        assert release.asked > 0  # the warm-up's runs were counted by it
        assert "voicestream_session_renewals 0.0" in app.state.server.metrics.render().decode()


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
        releases_after(quick_release, count)
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
    with engine.idle_release.running(sessions[1]), engine.idle_release.running(sessions[1]):
        pass  # two runs at once: the session is one to renew
    monkeypatch.setattr(engine, "_renewable_graph", ModelGraph("/nonexistent/model.onnx", graph.durations, graph.split))
    assert engine.renew_sessions(lambda: True) is False
    assert engine.renew_sessions(lambda: True) is False
    assert caplog.text.count("could not build the model sessions again") == 1
    assert engine._sessions == sessions
