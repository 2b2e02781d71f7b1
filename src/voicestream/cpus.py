"""How many CPU cores this process may use, and how many of them are busy right now.

`os.cpu_count()` counts the machine's cores, not the ones a container or a task set lets
this process run on. `available_cpus` takes the smallest of the CPU affinity mask and the
cgroup's CPU quota (v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`), so a
container limited to two cores on a 64-core host runs two model runs, not 64.

`CPU_USE` is this process's ledger of cores that long-running native work holds (the local
LLM while it generates, model runs while they render): the speech scheduler gives a first
chunk every core unless another first chunk holds them, and other runs one core each, ranked:
each part of such a run waits a moment while a more urgent run of this process is going, and
is never niced, so that work other processes do beside it cannot starve it. Another
listener's model run of a lower level (a ranked run, or a claim whose listener ran dry after
its audio began) already going when a new answer's first chunk claims the cores is stopped
(`CpuUse.interruptible`: ONNX Runtime's ``RunOptions.terminate``, checked between two
nodes) and made again after its wait, so that the first chunk has the cores at once rather
than when that run ends. The local LLM pauses between tokens while a first chunk renders.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")


def available_cpus(cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> int:
    """The cores this process may use: affinity mask and cgroup CPU quota, at least one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_quota(cgroup_root, proc_cgroup)
    if quota is not None:
        cores = min(cores, math.ceil(quota))
    return max(1, cores)


def cgroup_cpu_quota(cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> float | None:
    """The CPU quota in cores of this process's cgroup and its parents (the tightest), or
    None when there is none or it cannot be read."""
    quotas = [quota for path in _cgroup_dirs(cgroup_root, proc_cgroup) if (quota := _quota_in(path))]
    return min(quotas, default=None)


def _cgroup_dirs(cgroup_root: Path, proc_cgroup: Path) -> Iterator[Path]:
    """The cgroup directories that may hold this process's CPU limit, innermost first."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        hierarchy, _, controllers_and_path = line.partition(":")
        controllers, _, relative = controllers_and_path.partition(":")
        if hierarchy == "0" and not controllers:
            base = cgroup_root  # v2: one unified hierarchy
        elif "cpu" in controllers.split(","):
            base = next(
                (cgroup_root / name for name in ("cpu,cpuacct", "cpu", "cpuacct,cpu") if (cgroup_root / name).is_dir()),
                cgroup_root / "cpu",
            )
        else:
            continue
        path = base / relative.lstrip("/")
        while True:
            yield path
            if path == base:
                break
            path = path.parent
    yield cgroup_root  # a container sees its own cgroup mounted at the root


def _quota_in(path: Path) -> float | None:
    try:
        if (path / "cpu.max").is_file():
            quota, _, period = (path / "cpu.max").read_text().partition(" ")
            return None if quota.strip() == "max" else int(quota) / int(period)
        if (path / "cpu.cfs_quota_us").is_file():
            quota_us = int((path / "cpu.cfs_quota_us").read_text())
            period_us = int((path / "cpu.cfs_period_us").read_text())
            return None if quota_us <= 0 else quota_us / period_us
    except (OSError, ValueError, ZeroDivisionError):
        return None
    return None


def lower_thread_priority(niceness: int) -> None:
    """Raise the calling thread's nice value by `niceness` (Linux threads each have one), so
    that it yields the CPU to more urgent threads; a no-op where the OS does not allow it."""
    with contextlib.suppress(AttributeError, OSError):
        thread = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, thread, os.getpriority(os.PRIO_PROCESS, thread) + niceness)


class Stoppable(Protocol):
    """What a model run can be stopped through: ONNX Runtime's ``RunOptions``."""

    terminate: bool


FIRST_WORDS = 0
"""The level of an urgent claim for a request none of whose audio went out yet (`claim_urgent`)."""
RAN_DRY = 1
"""The level of an urgent claim for a request whose listener ran dry after its audio began:
first words outrank it, so that a new answer starts beside answers the cores cannot keep up
with (they degrade, the newcomer does not)."""


@dataclass(eq=False)
class _Block:
    """A claim or ranked run one thread is inside (`CpuUse.claim_urgent`, `CpuUse.ranked`)."""

    level: int
    claim: bool
    owner: object
    """Whose work it is (the speech scheduler: the listener); None: nobody's in particular."""
    outer: _Block | None
    ended: bool = False
    cores: int = 0
    """The cores a claim asked for: every core it may use (`CpuUse.claim_urgent`)."""
    taken: int = 0
    """The cores it holds: ``cores``, or one beside a claim of its level or a lower one, or
    one once it goes on with one thread (`CpuUse.narrowed`)."""


class CpuUse:
    """Cores held by native work in this process: background work (the local LLM while it
    generates, at a raised nice value), ranked one-thread model runs (each waits a moment
    while a more urgent run goes) and urgent work (a first chunk, at normal priority).

    Every run has a level, lower going first: urgent claims `FIRST_WORDS` and `RAN_DRY`,
    then the ranked runs (level ``RAN_DRY + rank``). A `FIRST_WORDS` claim that pauses
    background work stops each other owner's model run of a higher level going at that
    moment (`interruptible`): a new answer's first words take the cores at once. A `RAN_DRY`
    claim stops nothing: two answers the cores cannot keep up with would throw each other's
    work away, turn and turn about."""

    def __init__(self) -> None:
        self._held = 0
        self._urgent = 0
        self._pausing = 0
        """Urgent runs that want background work paused."""
        self._lock = threading.Lock()
        self._calm = threading.Condition(self._lock)
        self._ranks: list[int] = []
        """The rank of each one-thread run going (`ranked`)."""
        self._claims: list[_Block] = []
        """Each urgent claim going, with its level, owner and cores (`claim_urgent`)."""
        self._turn = threading.Condition(self._lock)
        """Notified whenever urgent work or a ranked run ends."""
        self._thread_block = threading.local()
        """``.block``: the innermost claim or ranked run the calling thread is inside, if any."""
        self._stoppable: dict[Stoppable, tuple[int, object]] = {}
        """The run options of the model runs going now that may be stopped, with their level and owner."""
        self.interrupted = 0
        """Model runs stopped because a more urgent claim took the cores, since the start."""

    @property
    def held(self) -> int:
        """Cores held, background and urgent together."""
        with self._lock:
            return self._held

    @property
    def urgent(self) -> int:
        """Cores held by urgent work."""
        with self._lock:
            return self._urgent

    @contextmanager
    def holding(self, cores: int) -> Iterator[None]:
        """Count `cores` as busy with background work until the block ends."""
        with self._lock:
            self._held += cores
        try:
            yield
        finally:
            with self._lock:
                self._held -= cores

    @contextmanager
    def claim_urgent(
        self, cores: int, *, pause_background: bool = True, level: int = FIRST_WORDS, owner: object = None
    ) -> Iterator[int]:
        """Hold `cores` for urgent work until the block ends, or one core when other urgent
        work of its ``level`` or a lower one already holds some; yields how many were taken.
        A claim first waits, at most `RANKED_PAUSE_MAX_S`, while claims of a lower level hold
        every core (`_outranked`).

        Background work does not count against the claim: it runs niced, and ranked runs
        wait before their next part (`ranked`). With
        `pause_background` (a listener is waiting in silence) it also pauses in
        `yield_to_urgent` where it can, and a `FIRST_WORDS` claim stops the model runs of
        a higher level going now of other owners (``owner``; `interruptible`: its own listener's
        work is not thrown away), so the run gets every core to itself; without
        (the listener still has audio playing) it goes on, since what it produces (the
        local LLM's next sentence) is needed next."""
        with self._lock:
            self._turn.wait_for(lambda: not self._outranked(level, owner), RANKED_PAUSE_MAX_S)
            taken = cores if all(claim.level > level for claim in self._claims) else 1
            block = self._enter(level, True, owner)
            block.cores, block.taken = cores, taken
            self._claims.append(block)
            self._urgent += taken
            self._held += taken
            self._pausing += pause_background
            if pause_background and level == FIRST_WORDS:
                self._stop_above(level, owner)
        try:
            yield taken
        finally:
            self._leave(block)
            with self._lock:
                self._claims.remove(block)
                self._urgent -= taken
                self._held -= taken
                self._pausing -= pause_background
                if self._pausing == 0:
                    self._calm.notify_all()
                self._turn.notify_all()

    def _enter(self, level: int, claim: bool, owner: object) -> _Block:
        """A block of ``level`` the calling thread is in now, inside the one it was in."""
        block = _Block(level, claim, owner, self._block())
        self._thread_block.block = block
        return block

    def _leave(self, block: _Block) -> None:
        """``block`` ended: the calling thread is in the innermost block of it not ended yet
        (blocks may end out of order)."""
        block.ended = True
        inner = self._block()
        while inner is not None and inner.ended:
            inner = inner.outer
        self._thread_block.block = inner

    def _block(self) -> _Block | None:
        return getattr(self._thread_block, "block", None)

    def _level(self) -> int:
        """The calling thread's level: its block's, else `FIRST_WORDS` (it is not stopped)."""
        block = self._block()
        return FIRST_WORDS if block is None else block.level

    def words_out(self) -> None:
        """The calling thread's `FIRST_WORDS` claim handed its first audio over: it goes on at
        `RAN_DRY`'s level, so that a new request's first words outrank the rest of its piece,
        and the `RAN_DRY` work that waited for its first words goes on."""
        with self._lock:
            block = self._block()
            if block is not None and block.claim and block.level == FIRST_WORDS:
                block.level = RAN_DRY
                self._turn.notify_all()  # runs that waited for these first words go on

    def narrowed(self) -> None:
        """The calling thread's claim goes on with one thread (`crowded`): it counts one core
        towards the cores first words hold (`_outranked`), so that another listener's next
        window does not wait idle for it."""
        with self._lock:
            block = self._block()
            if block is not None and block.claim and block.taken > 1:
                block.taken = 1
                self._turn.notify_all()

    def _stop_above(self, level: int, owner: object) -> None:
        """Stop the model runs of a level above ``level`` going now for other owners than
        ``owner`` (under the lock)."""
        for options, (of, whose) in list(self._stoppable.items()):
            if of > level and (owner is None or whose is not owner):
                options.terminate = True
                self.interrupted += 1
                del self._stoppable[options]

    def crowded(self) -> bool:
        """Other urgent work of the calling thread's claim's level or a lower one holds
        cores beside it: a run on several threads goes on with one (its claim still counts
        the cores it took until its block ends)."""
        level = self._level()
        with self._lock:
            return sum(claim.level <= level for claim in self._claims) > 1

    @contextmanager
    def ranked(self, rank: int, owner: object = None) -> Iterator[None]:
        """Hold one core for a one-thread run of ``rank`` (1 or more; urgent work is rank 0).
        The run first waits, at most `RANKED_PAUSE_MAX_S`, while urgent work or a run of a
        lower rank goes in this process, then starts whatever goes. It yields by waiting,
        never by a nice value: a thread reniced beside other processes' work starves mid-run,
        and cannot take its priority back without a privilege containers seldom have."""
        with self._lock:
            self._turn.wait_for(lambda: not self._more_urgent_than(rank), RANKED_PAUSE_MAX_S)
            self._held += 1
            self._ranks.append(rank)
        block = self._enter(RAN_DRY + rank, False, owner)
        try:
            yield
        finally:
            self._leave(block)
            with self._lock:
                self._held -= 1
                self._ranks.remove(rank)
                self._turn.notify_all()

    def _more_urgent_than(self, rank: int) -> bool:
        """Urgent work or a ranked run of a lower rank is going (under the lock)."""
        return bool(self._urgent) or any(other < rank for other in self._ranks)

    @property
    def may_stop_here(self) -> bool:
        """The calling thread is inside a claim or ranked run a more urgent claim can stop."""
        return self._level() > FIRST_WORDS

    @contextmanager
    def interruptible(self, options: Stoppable) -> Iterator[None]:
        """Around one model run made with ``options`` inside a claim or ranked run of a level
        below `FIRST_WORDS`'s: when another owner's `FIRST_WORDS` claim that pauses background
        work starts while it goes, its ``terminate`` is set, ONNX Runtime stops the run between two
        nodes (tens of milliseconds) and raises, and `interrupted` counts it; the caller then
        waits its turn (`wait_turn`) and runs it again. Elsewhere nothing is registered."""
        if not self.may_stop_here:
            yield
            return
        with self._lock:
            block = self._block()
            assert block is not None  # may_stop_here
            self._stoppable[options] = (block.level, block.owner)
        try:
            yield
        finally:
            with self._lock:
                self._stoppable.pop(options, None)

    @property
    def stoppable(self) -> int:
        """Model runs going now that a more urgent claim would stop."""
        with self._lock:
            return len(self._stoppable)

    def wait_turn(self, stopped: bool = True) -> None:
        """Before a model run that may be stopped (`interruptible`): wait, at most
        `RANKED_PAUSE_MAX_S`, while other owners' first words hold every core, so that
        nothing of a lower level starts beside them (a claim's next window, a ranked run whose part waited
        its longest before they came). After a run was ``stopped``, a ranked run first waits
        as its part did when it began (`ranked`)."""
        block = self._block()
        if block is None:
            return
        with self._lock:
            if stopped and block.level > RAN_DRY:
                self._turn.wait_for(lambda: not self._more_urgent_than(block.level - RAN_DRY), RANKED_PAUSE_MAX_S)
            self._turn.wait_for(lambda: not self._outranked(RAN_DRY, block.owner), RANKED_PAUSE_MAX_S)

    def _outranked(self, level: int, owner: object) -> bool:
        """Other owners' claims of a lower level than ``level`` hold every core, as many as
        they asked for (under the lock). A claim that took one thread beside another's first words leaves a core that
        nothing else would use: two listeners that start together go on side by side once
        the first one's audio is out, rather than the first one's next window waiting idle
        for the second's first words (`bench transport`'s (b), docs/BENCHMARKS.md)."""
        lower = [claim for claim in self._claims if claim.level < level and (owner is None or claim.owner is not owner)]
        return bool(lower) and sum(claim.taken for claim in lower) >= max(claim.cores for claim in lower)

    def yield_to_urgent(self, timeout_s: float) -> bool:
        """Block while urgent work that asked for it holds cores, at most `timeout_s`:
        background work that proceeds in small steps (the local LLM, between two tokens)
        calls this so that a first chunk has the machine. True if no such work was running
        when it returned."""
        with self._lock:
            return self._calm.wait_for(lambda: self._pausing == 0, timeout_s)


RANKED_PAUSE_MAX_S = 1.0
"""The longest a ranked run waits, before it starts, for more urgent runs to end (then it
starts beside them): a wait, not a nice value, so that nothing starves it."""

CPU_USE = CpuUse()
"""The process's ledger: the local LLM and the speech scheduler write to it."""
