"""The two bursts of test_memory, measured in a process of their own.

Run as ``python -m tests.engine.memory_burst``: loads the engine, renders the bursts, prints
one JSON object of figures. What these measure is the process's anonymous resident set, and
in a test worker everything else the process has done moves it: in clean clones of the
suite, a spell with no release gave back 32 to 40 MB by itself, and a renewal gave back 4 to
88 MB of what five or eight runs at once kept (stops 41 and 42), with and without the change
under test. In a process that does nothing else, what moves it is the burst and the release.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from voicestream.engine import KokoroEngine, Piece, memory
from voicestream.engine.offline import render_whole, synthesize

SENTENCES = (
    "Kokoro is a small model that runs on a laptop.",
    "The meeting has moved to Thursday afternoon.",
    "The listener should hear the first words soon.",
    "They pass the mills and the old stone bridges.",
)
"""Four short sentences, one model run each: enough for each thread's malloc arena to grow by
tens of megabytes (a longer text only costs more renders to show the same release)."""
QUIET_S = 0.2
"""The idle spell the bursts wait for before a release (the server's is a second)."""
MB = 2**20


def resident_bytes() -> int:
    """The process's anonymous resident memory (``RssAnon``): the heap, without the file pages
    (shared libraries, the model's files) the kernel may drop or read in again at any time
    (VmRSS once fell by 23 MB in a spell with no release)."""
    resident = memory.anonymous_resident_bytes()
    assert resident is not None, "/proc/self/status has no RssAnon"
    return resident


def releases_after(release: memory.IdleRelease, count: int, timeout_s: float = 30.0) -> int:
    """Bounded polling: ``release``'s count once it passes ``count``."""
    deadline = time.monotonic() + timeout_s
    while release.releases <= count:
        assert time.monotonic() < deadline, "the heap was not handed back after the engine went idle"
        time.sleep(0.02)
    return release.releases


def settled(release: memory.IdleRelease, timeout_s: float = 30.0) -> int:
    """Bounded polling: ``release``'s count once nothing is left to release or renew."""
    deadline = time.monotonic() + timeout_s
    while not release.settled:
        assert time.monotonic() < deadline, "the idle release did not settle"
        time.sleep(0.02)
    return release.releases


def ran_at_once(engine: KokoroEngine) -> object:
    """A session, or a front and vocoder pair, of ``engine`` that had runs at once."""
    release = engine.idle_release
    pairs = [pair for pair in engine._split_models.values() if any(map(release.ran_at_once, pair.sessions))]
    sessions = [session for session in engine._sessions.values() if release.ran_at_once(session)]
    assert pairs or sessions, "no session had runs at once"
    return (sessions + pairs)[0]


def heap_burst(engine: KokoroEngine, release: memory.IdleRelease) -> dict[str, float]:
    """Four threads render a sentence each at once; the spell after it, held as a run, is the
    control (no release may come); then the release. Megabytes."""
    count = release.releases
    render_whole(engine, next(engine.plan("Settle.")), "af_heart", 1.0)
    releases_after(release, count)
    settled(release)  # a renewal the release started is over too: nothing more is given back
    before = resident_bytes()
    # the pool's threads live until every figure is taken, as a server's workers do: a thread
    # that exits frees its own buffers, and that raced the control spell (32 to 40 MB given
    # back in it, with no release, when the pool was closed before it)
    with ThreadPoolExecutor(len(SENTENCES)) as pool:
        with release.running():  # the burst and the spell after it are one run: no release
            releases = release.releases
            list(pool.map(lambda text: synthesize(engine, text, "af_heart"), SENTENCES))
            after_burst = resident_bytes()
            time.sleep(QUIET_S * 2)  # the control: a spell twice the release's, with no release
            held = resident_bytes()
            released_in_spell = release.releases - releases
        releases_after(release, releases)
        released = resident_bytes()
    return {
        "grown": (after_burst - before) / MB,
        "without": (after_burst - held) / MB,
        "given_back": (held - released) / MB,
        "releases_in_control": released_in_spell,
    }


def renewal_burst(engine: KokoroEngine, release: memory.IdleRelease) -> dict[str, object]:
    """Five threads render at once; a release alone, then the control (a second quiet spell
    and release, no renewal), then a renewal with one replaced session still held (as a
    parked request's generator would hold it), then that session let go. Megabytes, counts,
    and whether the renewed engine renders the same."""
    piece = next(engine.plan("The meeting has moved to Thursday afternoon.", cut_first_clause=False))
    reference = render_whole(engine, piece, "af_heart", 1.0).audio
    release.renew_above = float("inf")  # the first spell releases the heap, renews nothing
    count = release.releases
    texts = (*SENTENCES, "Please remember to bring your umbrella this afternoon.")
    with ThreadPoolExecutor(len(texts)) as pool:  # its threads live until the last figure
        list(pool.map(lambda text: synthesize(engine, text, "af_heart"), texts))
        return _renewed(engine, release, count, piece, reference)


def _renewed(engine: KokoroEngine, release: memory.IdleRelease, count: int, piece: Piece, reference: np.ndarray) -> dict[str, object]:
    """`renewal_burst` after its burst, the burst's threads still alive."""
    releases_after(release, count)
    count = settled(release)
    first_release = resident_bytes()
    with release.running():  # the control: one more quiet spell and release, no renewal
        pass
    releases_after(release, count)
    count = settled(release)
    released = resident_bytes()
    renewals = release.renewals, engine.renewals
    release.renew_above = 1e-6  # the next spell renews whatever the heap holds
    held = ran_at_once(engine)
    with release.running():
        pass
    releases_after(release, count)
    count = settled(release)  # the renewal, and the release the sessions it freed at once asked for
    held_replaced = held not in [*engine._sessions.values(), *engine._split_models.values()]
    time.sleep(QUIET_S * 3)
    releases_while_held = release.releases - count  # nothing ran and nothing was let go since
    del held
    releases_after(release, count)  # the replaced pair, let go, asks for a release of its own
    renewed = resident_bytes()
    return {
        "control": (first_release - released) / MB,
        "given_back": (released - renewed) / MB,
        "renewals": [release.renewals - renewals[0], engine.renewals - renewals[1]],
        "held_replaced": held_replaced,
        "releases_while_held": releases_while_held,
        "same_samples": bool(np.array_equal(render_whole(engine, piece, "af_heart", 1.0).audio, reference)),
    }


def main() -> None:
    release = memory.IdleRelease(QUIET_S, renew_after_s=2 * QUIET_S)
    engine = KokoroEngine.load(warm_up=False, idle_release=release)  # the heap burst's first render warms it up
    print(json.dumps({"heap": heap_burst(engine, release), "renewal": renewal_burst(engine, release)}))


if __name__ == "__main__":
    main()
