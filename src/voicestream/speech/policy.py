"""What the engine renders next, for whom, on which lane, whole or window by window.

One quantity drives it: a listener's **slack**, its audio left to play less the predicted
render (`voicestream.speech.pace`) of the piece it needs next. `decide` is a pure function of
a frozen `Snapshot` (no clock, threads or model); the scheduler applies it.
- Slack on one thread not *in hand* (`MARGIN`): **urgent**, every core it can claim; else it
  **yields**: one thread, each part waiting while an urgent run goes (`CpuUse.ranked`), unless
  it is an urgent need no urgent worker was free for (`Start.claims`). Every piece is windowed.
- Least slack first (those that run dry whatever renders: least audio left, then shortest
  render), so answers beyond the cores degrade alike; a displaced run is left after its part.
- Once a request speaks, its listener's next one renders ahead (yielding) within the share; the
  one it needs renders while nothing is to be sent before it or within the share, and is
  stale after ``stale_after_s`` waiting with no piece taken.
- A silent listener's first part made beside other first words waits for its second while one
  thread would not keep its slack in hand, or no run is measured yet (`holds_start`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from voicestream import limits
from voicestream.speech.pace import PaceTable

MARGIN = 0.5
"""Slack is *in hand* when it is at least this fraction of the render it is measured
against: room for the prediction's error and for runs that start beside it."""


class Lane(Enum):
    URGENT = "urgent"
    """Normal priority, every core it can claim (`voicestream.cpus.CPU_USE`); a silent
    listener's first words outrank a playing listener's run, which pauses no background work."""
    YIELDING = "yielding"
    """One thread, each part waiting while an urgent run goes: it takes what urgent runs leave."""


@dataclass(frozen=True)
class Budgets:
    """The limits the scheduler enforces (defaults: `voicestream.limits`, as `ServerSettings`)."""

    max_queue: int = limits.MAX_QUEUE
    max_sessions: int = limits.MAX_SESSIONS
    listener_budget_bytes: int = limits.LISTENER_BUDGET_BYTES
    buffer_budget_bytes: int = limits.BUFFER_BUDGET_BYTES
    stale_after_s: float = limits.STALE_AFTER_S

    @property
    def reserved_per_session(self) -> int:
        return max(1, self.max_queue // max(1, self.max_sessions))

    def share(self, listeners: int) -> int:
        """What one listener may hold of rendered, unsent audio with ``listeners`` active."""
        return min(self.listener_budget_bytes, self.buffer_budget_bytes // max(1, listeners))


@dataclass(frozen=True)
class ListenerView:
    """One listener with a request not ended."""

    key: int
    left_s: float = 0.0
    """Seconds of audio handed over and not yet played (0: silent)."""
    held_bytes: int = 0
    """Rendered audio its route has not sent yet."""


@dataclass(frozen=True)
class RequestView:
    """One request not yet rendered to its end."""

    key: int
    """Its place in arrival order (unique)."""
    listener: int
    phonemes: int
    """Its next piece's (or the rest's of a piece left after a part; an estimate from the
    text before it is planned)."""
    speed: float = 1.0
    planned: bool = False
    """A worker has taken a piece of it: it can no longer go stale."""
    spoken: bool = False
    """Some of its audio has been handed over."""
    waited_s: float = 0.0
    """Since it became due (its listener's earlier requests all rendered)."""
    running: Lane | None = None
    """The lane a worker renders it on now; None: it waits."""
    held_before: int = 0
    """Rendered audio its route must send before this request's next piece (its own and its
    listener's earlier requests'): a listener's bytes beyond these are of requests rendered
    ahead, which cannot go out before it, so they never hold it back."""
    leavable: bool = False
    """It runs a windowed piece: it can be left after a part."""


@dataclass(frozen=True)
class Snapshot:
    """Everything the policy reads, taken at one moment."""

    listeners: tuple[ListenerView, ...]
    requests: tuple[RequestView, ...]
    """In arrival order."""
    urgent_free: int = 0
    """Idle urgent workers."""
    yielding_free: int = 0
    """Idle yielding workers."""
    pace: PaceTable = field(default_factory=PaceTable)
    many_threads: int = 2
    """The threads of an urgent run that has the machine."""
    can_window: bool = True
    budgets: Budgets = Budgets()
    urgent_spare: int = 0
    """Of the idle urgent workers, how many only a listener that outranks a running urgent run
    may take: it starts at once, beside the run it displaces, not at that run's next part."""


@dataclass(frozen=True)
class Start:
    """Give a worker of ``lane`` the request's next piece (or the rest of its left piece)."""

    request: int
    lane: Lane
    windowed: bool
    claims: bool = False
    """Its run claims the cores as an urgent run does, though on a yielding worker: its
    listener's need is urgent and no urgent worker was free for it."""


@dataclass(frozen=True)
class Decisions:
    starts: tuple[Start, ...] = ()
    """In order of urgency, at most the idle workers of each lane."""
    leave: frozenset[int] = frozenset()
    """Running requests whose windowed piece is to be left after its current part."""
    stale: frozenset[int] = frozenset()
    """Requests to fail ``request_stale``."""


@dataclass(frozen=True)
class Need:
    """What one request needs now, from its listener's slack."""

    request: RequestView
    lane: Lane
    windowed: bool
    rank: tuple[int, float, float, int]
    """Sort key: (0, audio left, render) for a listener that runs dry whatever renders, before
    (1, slack, render) for the others; then arrival."""


def in_hand(left_s: float, render_s: float) -> bool:
    """The slack ``left_s - render_s`` is in hand: the listener will not run dry."""
    return left_s - render_s >= MARGIN * render_s


def holds_start(first_part_s: float, pace: PaceTable, threads: int) -> bool:
    """Whether a silent listener's first part is held back until its second is made.

    Windows grow (`voicestream.engine.vocoder.plan_windows`): the second is at least as long
    as the first, so it renders while only the first plays. Where the run goes on with
    ``threads`` that cannot render it with that slack in hand (one thread beside another
    listener's first words, on a machine whose thread barely keeps pace), sending the first
    part at once buys first audio with a silence at each seam, each longer than the last: the
    listener who got a gap holds only the newest part while the next, as long as all before
    it, renders. Held, the two parts go out together and the doubling windows keep pace.

    Before this server has measured a run (`PaceTable.measured`), the part is held: the prior
    is no machine's pace, and guessing wrong costs a silence that grows at each seam, while
    holding costs one window's wait for the first sound."""
    if first_part_s <= 0:
        return False
    return not pace.measured or not in_hand(first_part_s, first_part_s * pace.render_per_audio(threads))


def need(request: RequestView, listener: ListenerView, snapshot: Snapshot) -> Need:
    """The lane, windows and rank the request's listener's slack gives its next piece."""
    one = snapshot.pace.predict(request.phonemes, request.speed, 1)
    many = snapshot.pace.predict(request.phonemes, request.speed, snapshot.many_threads)
    urgent = not in_hand(listener.left_s, one)
    slack = listener.left_s - many
    rank = (0, listener.left_s, many, request.key) if slack < 0 else (1, slack, many, request.key)
    return Need(request, Lane.URGENT if urgent else Lane.YIELDING, snapshot.can_window, rank)


def decide(snapshot: Snapshot) -> Decisions:
    """The starts, leaves and stale requests for this snapshot (see the module docstring).

    A windowed run is left after its current part when its listener now has slack in hand
    and another is urgent, when an urgent listener with less slack waits for its worker,
    when it yields and an urgent worker is free for it, or when it renders ahead and its
    listener's share is spent."""
    listeners = {listener.key: listener for listener in snapshot.listeners}
    heads: dict[int, RequestView] = {}
    ahead: dict[int, RequestView] = {}
    for request in snapshot.requests:
        if heads.setdefault(request.listener, request) is not request:
            ahead.setdefault(request.listener, request)
    stale = frozenset(
        request.key for request in heads.values()
        if request.running is None and not request.planned and request.waited_s > snapshot.budgets.stale_after_s
    )
    share = snapshot.budgets.share(len(snapshot.listeners))
    total_held = sum(listener.held_bytes for listener in snapshot.listeners)

    def within_share(listener: ListenerView) -> bool:
        return listener.held_bytes < share and total_held < snapshot.budgets.buffer_budget_bytes

    def within_budget(request: RequestView) -> bool:
        return request.running is not None or request.held_before == 0 or within_share(listeners[request.listener])

    needs = [
        need(request, listeners[request.listener], snapshot) for request in heads.values()
        if request.key not in stale and within_budget(request)
    ]
    waiting = sorted((n for n in needs if n.request.running is None), key=lambda n: n.rank)
    running = [n for n in needs if n.request.running is not None and n.request.leavable]
    free = {Lane.URGENT: snapshot.urgent_free, Lane.YIELDING: snapshot.yielding_free}
    starts: list[Start] = []
    blocked: list[Need] = []
    spare = {Lane.URGENT: snapshot.urgent_spare, Lane.YIELDING: 0}
    for waiter in waiting:
        if free[waiter.lane] > spare[waiter.lane]:
            starts.append(Start(waiter.request.key, waiter.lane, waiter.windowed))
            free[waiter.lane] -= 1
        elif waiter.lane is Lane.URGENT:
            blocked.append(waiter)
    leave: set[int] = set()
    victims = sorted((n for n in running if n.request.running is Lane.URGENT), key=lambda n: n.rank, reverse=True)
    worst_urgent = max((n.rank for n in needs if n.request.running is Lane.URGENT), default=None)
    for waiter in blocked:
        displaces = bool(victims) and victims[0].rank > waiter.rank
        if displaces:
            leave.add(victims.pop(0).request.key)  # its worker is this waiter's at its next part
        if free[Lane.URGENT] and worst_urgent is not None and worst_urgent > waiter.rank:
            starts.append(Start(waiter.request.key, Lane.URGENT, waiter.windowed))  # a spare one, at once
            free[Lane.URGENT] -= 1
        elif not displaces and free[Lane.YIELDING] and snapshot.can_window:
            starts.append(Start(waiter.request.key, Lane.YIELDING, True, claims=True))  # moved up at a part later
            free[Lane.YIELDING] -= 1
    held_up = {n.request.listener for n in blocked}
    for request in ahead.values():
        head, listener = heads[request.listener], listeners[request.listener]
        may = head.spoken and request.listener not in held_up and within_share(listener)
        if request.running is None and free[Lane.YIELDING] and may:
            starts.append(Start(request.key, Lane.YIELDING, snapshot.can_window))  # moved up at a part if needed
            free[Lane.YIELDING] -= 1
        elif request.leavable and not within_share(listener):  # ahead of need: no further than the share
            leave.add(request.key)
    others_urgent = sum(n.lane is Lane.URGENT for n in needs)
    for run in running:
        if run.request.key in leave:
            continue
        if run.request.running is Lane.URGENT and run.lane is Lane.YIELDING and others_urgent:
            leave.add(run.request.key)
        elif run.request.running is Lane.YIELDING and run.lane is Lane.URGENT and (
            free[Lane.URGENT] > spare[Lane.URGENT]
            or (free[Lane.URGENT] and worst_urgent is not None and worst_urgent > run.rank)
        ):  # a worker of its own, or the spare one as a blocked waiter with less slack gets it
            leave.add(run.request.key)
            free[Lane.URGENT] -= 1
    return Decisions(tuple(starts), frozenset(leave), stale)
