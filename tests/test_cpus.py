"""Available cores from the affinity mask and the cgroup CPU quota, read from real cgroup
files laid out as the kernel lays them out (v2 unified, v1 cpu controller)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from voicestream.cpus import (
    RAN_DRY,
    CpuUse,
    available_cpus,
    cgroup_cpu_quota,
    lower_thread_priority,
)

AFFINITY = len(os.sched_getaffinity(0))


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def v2(tmp_path: Path, limits: dict[str, str]) -> tuple[Path, Path]:
    """A unified hierarchy with `cpu.max` per cgroup path; the process is in the deepest."""
    root = tmp_path / "cgroup"
    for relative, cpu_max in limits.items():
        write(root / relative.lstrip("/") / "cpu.max", cpu_max + "\n")
    proc = tmp_path / "proc-self-cgroup"
    write(proc, f"0::{max(limits, key=len)}\n")
    return root, proc


def test_v2_quota_in_cores(tmp_path: Path) -> None:
    root, proc = v2(tmp_path, {"/app": "150000 100000"})
    assert cgroup_cpu_quota(root, proc) == 1.5
    assert available_cpus(root, proc) == min(AFFINITY, 2)


def test_v2_unlimited_leaves_the_affinity_mask(tmp_path: Path) -> None:
    root, proc = v2(tmp_path, {"/app": "max 100000"})
    assert cgroup_cpu_quota(root, proc) is None
    assert available_cpus(root, proc) == AFFINITY


def test_v2_a_parent_limit_applies(tmp_path: Path) -> None:
    root, proc = v2(tmp_path, {"/kube": "100000 100000", "/kube/pod/app": "max 100000"})
    assert cgroup_cpu_quota(root, proc) == 1.0
    assert available_cpus(root, proc) == 1


def test_v1_cfs_quota(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    write(root / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_quota_us", "50000\n")
    write(root / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_period_us", "100000\n")
    proc = tmp_path / "proc-self-cgroup"
    write(proc, "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n")
    assert cgroup_cpu_quota(root, proc) == 0.5
    assert available_cpus(root, proc) == 1  # never below one


def test_v1_no_quota_and_unreadable_files(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    write(root / "cpu" / "cpu.cfs_quota_us", "-1\n")
    write(root / "cpu" / "cpu.cfs_period_us", "100000\n")
    proc = tmp_path / "proc-self-cgroup"
    write(proc, "3:cpu:/\n")
    assert cgroup_cpu_quota(root, proc) is None
    write(root / "cpu" / "cpu.cfs_quota_us", "garbage\n")
    assert cgroup_cpu_quota(root, proc) is None
    assert available_cpus(tmp_path / "missing", tmp_path / "missing") == AFFINITY


def test_this_machine() -> None:
    assert 1 <= available_cpus() <= (os.cpu_count() or 1)


def test_urgent_work_takes_every_core_unless_other_urgent_work_holds_them() -> None:
    use = CpuUse()
    with use.claim_urgent(4) as first:
        assert (first, use.urgent, use.held) == (4, 4, 4)
        with use.claim_urgent(4) as second:
            assert (second, use.urgent) == (1, 5)
    assert (use.urgent, use.held) == (0, 0)
    with use.holding(1), use.claim_urgent(4) as beside_an_llm:
        assert (beside_an_llm, use.held) == (4, 5)


def test_background_work_waits_for_urgent_work_at_most_its_timeout() -> None:
    use = CpuUse()
    assert use.yield_to_urgent(0.0)  # nothing urgent: returns at once
    waited: list[tuple[bool, float]] = []

    def background() -> None:
        started = time.perf_counter()
        waited.append((use.yield_to_urgent(5.0), time.perf_counter() - started))

    with use.claim_urgent(2):
        thread = threading.Thread(target=background)
        thread.start()
        time.sleep(0.3)
        assert thread.is_alive()  # still waiting while the urgent run holds the cores
    thread.join(5)
    calm, seconds = waited[0]
    assert calm and 0.25 <= seconds < 4
    with use.claim_urgent(2):
        started = time.perf_counter()
        assert not use.yield_to_urgent(0.2)  # gives up after its timeout
        assert time.perf_counter() - started >= 0.2


def test_holding_is_released_on_error_and_across_threads() -> None:
    use = CpuUse()
    with pytest.raises(RuntimeError), use.holding(2):
        raise RuntimeError
    assert use.held == 0
    peak: list[int] = []

    def busy() -> None:
        for _ in range(2000):
            with use.holding(1):
                peak.append(use.held)

    threads = [threading.Thread(target=busy) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert use.held == 0 and 1 <= max(peak) <= 4


def test_lower_thread_priority_changes_only_the_calling_thread() -> None:
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: list[int] = []

    def worker() -> None:
        lower_thread_priority(5)
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == [min(base + 5, 19)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base


def test_urgent_work_beside_playing_audio_lets_background_work_go_on() -> None:
    use = CpuUse()
    with use.claim_urgent(2, pause_background=False) as taken:
        assert taken == 2
        assert use.yield_to_urgent(0.0)  # the next sentence is needed: the LLM goes on
        with use.claim_urgent(2) as second:
            assert second == 1 and not use.yield_to_urgent(0.05)
    assert use.yield_to_urgent(0.0)


class _RankedRun:
    """A one-thread run of some rank, in a thread of its own, held until `finish`."""

    def __init__(self, use: CpuUse, rank: int) -> None:
        self.native_id = 0
        self.started, self.end = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, args=(use, rank))
        self.thread.start()

    def _run(self, use: CpuUse, rank: int) -> None:
        self.native_id = threading.get_native_id()
        with use.ranked(rank):
            self.started.set()
            self.end.wait(10)

    @property
    def nice(self) -> int:
        return os.getpriority(os.PRIO_PROCESS, self.native_id)

    def finish(self) -> None:
        self.end.set()
        self.thread.join(10)


def test_a_ranked_run_waits_while_a_more_urgent_one_goes_and_is_never_niced(monkeypatch) -> None:
    """A run ahead of need starts at once alone; beside a playing listener's run (rank 1) or
    first audio it waits until they end; each counts one core, and none is niced, so that
    other processes' work cannot starve a run once it goes."""
    monkeypatch.setattr("voicestream.cpus.RANKED_PAUSE_MAX_S", 60.0)  # only an end lets it go here
    use = CpuUse()
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    playing = _RankedRun(use, 1)
    assert playing.started.wait(5) and use.held == 1
    ahead = _RankedRun(use, 2)
    assert not ahead.started.wait(0.2)  # waits for the more urgent run
    playing.finish()
    assert ahead.started.wait(5) and use.held == 1
    with use.claim_urgent(2):
        beside = _RankedRun(use, 1)  # a playing listener's run waits for first audio too
        assert not beside.started.wait(0.2)
    assert beside.started.wait(5) and use.held == 2
    assert (ahead.nice, beside.nice) == (base, base)
    for run in (ahead, beside):
        run.finish()
    assert use.held == 0


def test_a_ranked_run_starts_beside_a_more_urgent_one_after_its_longest_wait(monkeypatch) -> None:
    """The wait is bounded: a run that outlasts it (a long first audio) has the other beside it."""
    monkeypatch.setattr("voicestream.cpus.RANKED_PAUSE_MAX_S", 0.05)
    use = CpuUse()
    with use.claim_urgent(2):
        waiting = _RankedRun(use, 2)
        assert waiting.started.wait(5) and use.held == 3
        waiting.finish()
    assert use.held == 0


class _Options:
    """The one attribute of ONNX Runtime's ``RunOptions`` that `CpuUse.interruptible` sets."""

    terminate = False


def _registered_in(enter, use: CpuUse, options: _Options, entered: threading.Event, end: threading.Event) -> None:
    """In a thread: inside ``enter()`` (a claim or a ranked run), one stoppable run held until ``end``."""
    with enter(), use.interruptible(options):
        entered.set()
        end.wait(10)


def _holding(enter, use: CpuUse) -> tuple[_Options, threading.Event, threading.Thread]:
    options, entered, end = _Options(), threading.Event(), threading.Event()
    thread = threading.Thread(target=_registered_in, args=(enter, use, options, entered, end))
    thread.start()
    assert entered.wait(5)
    return options, end, thread


def test_first_words_stop_other_listeners_runs_of_every_lower_level_going_and_take_every_core(monkeypatch) -> None:
    """A new request's first words (a `FIRST_WORDS` claim) stop what runs beside them for other
    listeners: a ranked run and a listener's that ran dry (`RAN_DRY`); they take every core
    though that claim holds some. Their own listener's runs, another `FIRST_WORDS` claim, and
    anything when the claim does not pause background work (its listener still hears audio)
    or is a `RAN_DRY` one (answers the cores cannot keep up with would stop each other's
    runs in turn) are not stopped."""
    monkeypatch.setattr("voicestream.cpus.RANKED_PAUSE_MAX_S", 0.05)  # the RAN_DRY claim's wait for first words
    use = CpuUse()
    ranked, ranked_end, ranked_thread = _holding(lambda: use.ranked(2, "other"), use)
    own, own_end, own_thread = _holding(lambda: use.ranked(2, "newcomer"), use)
    dry, dry_end, dry_thread = _holding(lambda: use.claim_urgent(2, pause_background=False, level=RAN_DRY), use)
    first, first_end, first_thread = _holding(lambda: use.claim_urgent(2, pause_background=False), use)
    with use.claim_urgent(2, pause_background=False):
        pass
    with use.claim_urgent(2, level=RAN_DRY):
        pass
    assert not any(options.terminate for options in (ranked, own, dry, first)) and use.interrupted == 0
    with use.claim_urgent(2, owner="newcomer") as taken:
        assert taken == 1  # a claim of its own level holds cores
    assert use.interrupted == 2 and ranked.terminate and dry.terminate
    assert not (own.terminate or first.terminate)
    for end, thread in ((ranked_end, ranked_thread), (own_end, own_thread), (dry_end, dry_thread), (first_end, first_thread)):
        end.set()
        thread.join(10)
    with use.claim_urgent(2, level=RAN_DRY), use.claim_urgent(2) as beside_a_dry_one:
        assert beside_a_dry_one == 2
        assert use.crowded() is False  # the first words go on, on every core
    assert use.interrupted == 2


def _claim_and_set(use: CpuUse, level: int, claimed: threading.Event) -> None:
    with use.claim_urgent(2, level=level):
        claimed.set()


def test_a_claim_whose_first_audio_went_out_is_outranked_by_new_first_words(monkeypatch) -> None:
    """`words_out`: once a claim's first audio is handed over, the rest of its piece runs at
    `RAN_DRY`'s level: a new request's first words stop its run, and a `RAN_DRY` claim
    waits, at most `RANKED_PAUSE_MAX_S`, while first words go, until their audio is out."""
    monkeypatch.setattr("voicestream.cpus.RANKED_PAUSE_MAX_S", 60.0)
    use = CpuUse()
    options, entered, spoke, end = _Options(), threading.Event(), threading.Event(), threading.Event()

    def speaking() -> None:
        with use.claim_urgent(2):
            use.words_out()
            with use.interruptible(options):
                entered.set()
                end.wait(10)

    thread = threading.Thread(target=speaking)
    thread.start()
    assert entered.wait(5)
    with use.claim_urgent(2) as taken:
        assert options.terminate and taken == 2
        waiting = threading.Thread(target=_claim_and_set, args=(use, RAN_DRY, spoke))
        waiting.start()
        assert not spoke.wait(0.2)  # a dry listener's claim waits while first words go...
        use.words_out()
        assert spoke.wait(5)  # ...until they are out
    end.set()
    thread.join(10)
    waiting.join(10)
    assert spoke.is_set()


def test_first_words_on_one_core_leave_the_other_to_a_listener_whose_audio_began(monkeypatch) -> None:
    """Two listeners start together: the first one's claim takes every core, the second's one
    (a claim of its level holds cores). Once the first one's audio is out (`words_out`), its
    next window goes on at once beside the second's first words, which hold one core of two:
    waiting would leave that core idle (a 190 ms hole before each first listener's second
    window in `bench transport`'s (b), docs/BENCHMARKS.md). First words that hold every core
    still make it wait (the test above)."""
    monkeypatch.setattr("voicestream.cpus.RANKED_PAUSE_MAX_S", 60.0)
    use = CpuUse()
    spoke, went, end = threading.Event(), threading.Event(), threading.Event()

    def first_listener() -> None:
        with use.claim_urgent(2, pause_background=False, owner="first"):
            spoke.wait(10)
            use.words_out()  # its first audio is out: RAN_DRY from here
            use.wait_turn(stopped=False)  # before its next window
            went.set()
            end.wait(10)

    thread = threading.Thread(target=first_listener)
    thread.start()
    try:
        while use.urgent < 2:  # the first listener's claim holds every core
            time.sleep(0.001)
        with use.claim_urgent(2, pause_background=False, owner="second") as taken:
            assert taken == 1
            spoke.set()
            assert went.wait(5)  # at once, not after the second's first words (60 s here)
    finally:
        spoke.set()
        end.set()
        thread.join(10)


def test_first_words_narrowed_to_one_thread_count_one_core(monkeypatch) -> None:
    """The other order: the second listener's audio is out first while the first listener's
    claim, which took every core, goes on with one thread (`narrowed`, as the scheduler's run
    does once crowded): the second listener's next window goes on at once."""
    monkeypatch.setattr("voicestream.cpus.RANKED_PAUSE_MAX_S", 60.0)
    use = CpuUse()
    claimed, narrow, went, end = threading.Event(), threading.Event(), threading.Event(), threading.Event()

    def second_listener() -> None:
        with use.claim_urgent(2, pause_background=False, owner="second") as taken:
            assert taken == 1
            claimed.set()
            narrow.wait(10)
            use.words_out()
            use.wait_turn(stopped=False)
            went.set()
            end.wait(10)

    with use.claim_urgent(2, pause_background=False, owner="first") as taken:
        assert taken == 2
        thread = threading.Thread(target=second_listener)
        thread.start()
        try:
            assert claimed.wait(5)
            use.narrowed()
            narrow.set()
            assert went.wait(5)  # the first listener's first words hold one core now
        finally:
            narrow.set()
            end.set()
            thread.join(10)
