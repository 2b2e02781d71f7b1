"""The scheduling policy on snapshots: what starts, on which lane, whole or windowed, what is
left after a part, what is stale. No threads, no model: the pace is a fixed table."""

from __future__ import annotations

from dataclasses import replace

import pytest

from voicestream.speech.pace import PaceTable
from voicestream.speech.policy import (
    Budgets,
    Decisions,
    Lane,
    ListenerView,
    RequestView,
    Snapshot,
    Start,
    decide,
    holds_start,
)

PACE = PaceTable(((1, 0.03), (2, 0.015)))
"""30 ms a phoneme on one thread, 15 on both cores: a 100-phoneme piece renders in 3 s on
one thread and 1.5 s on two, so its slack is in hand from 4.5 s and 2.25 s left to play."""
URGENT, YIELDING = Lane.URGENT, Lane.YIELDING


def snapshot(
    listeners: list[ListenerView], requests: list[RequestView], urgent_free: int = 2, yielding_free: int = 2,
    **settings: object,
) -> Snapshot:
    return Snapshot(tuple(listeners), tuple(requests), urgent_free, yielding_free, PACE, 2, **settings)  # type: ignore[arg-type]


def test_the_first_piece_of_the_first_request_is_urgent_and_windowed() -> None:
    decisions = decide(snapshot([ListenerView(1)], [RequestView(0, 1, phonemes=40)]))
    assert decisions == Decisions(starts=(Start(0, URGENT, windowed=True),))
    whole = decide(snapshot([ListenerView(1)], [RequestView(0, 1, phonemes=40)], can_window=False))
    assert whole.starts == (Start(0, URGENT, windowed=False),)


def test_a_fifth_piece_about_to_run_dry_goes_before_a_first_piece_with_slack() -> None:
    """Position does not matter: listener 1's fifth piece has 0.5 s of audio in front of it,
    listener 2's next request has 10 s; one worker of each lane is free, then only one urgent."""
    listeners = [ListenerView(1, left_s=0.5), ListenerView(2, left_s=10.0)]
    fifth, first = RequestView(0, 1, phonemes=100, planned=True), RequestView(1, 2, phonemes=20)
    assert decide(snapshot(listeners, [fifth, first])).starts == (
        Start(0, URGENT, windowed=True), Start(1, YIELDING, windowed=True),
    )
    assert decide(snapshot(listeners, [first, fifth], urgent_free=1, yielding_free=0)).starts == (
        Start(0, URGENT, windowed=True),
    )


@pytest.mark.parametrize(
    ("left_s", "expected"),
    [(0.0, Start(0, URGENT, True)), (3.0, Start(0, URGENT, True)), (5.0, Start(0, YIELDING, True))],
    ids=["dry: urgent", "short of one thread: urgent", "in hand: yields"],
)
def test_the_lane_comes_from_slack_and_every_piece_is_windowed(left_s: float, expected: Start) -> None:
    """Windowed whatever the lane, so that a run can move up or aside at a part; whole only
    where the engine cannot window."""
    assert decide(snapshot([ListenerView(1, left_s)], [RequestView(0, 1, phonemes=100, planned=True)])).starts == (
        expected,
    )
    whole = decide(snapshot([ListenerView(1, left_s)], [RequestView(0, 1, phonemes=100, planned=True)], can_window=False))
    assert whole.starts == (replace(expected, windowed=False),)


def test_a_listener_with_seconds_in_hand_yields_its_cores_to_an_urgent_one() -> None:
    """Listener 1's windowed piece runs on an urgent worker, and its listener now has 8 s to
    play: beside listener 2, silent, it is left after its current part; alone, it keeps the cores."""
    playing = RequestView(0, 1, phonemes=100, planned=True, running=URGENT, leavable=True)
    alone = decide(snapshot([ListenerView(1, 8.0)], [playing], urgent_free=1))
    assert alone == Decisions()
    beside = decide(snapshot([ListenerView(1, 8.0), ListenerView(2)], [playing, RequestView(1, 2, phonemes=20)], 1))
    assert beside.leave == {0} and beside.starts == (Start(1, URGENT, True),)


def test_an_urgent_listener_with_less_slack_takes_a_windowed_run_at_its_next_part() -> None:
    """No urgent worker is free: the running windowed piece with more to render is left for a
    newcomer's short first piece (both silent: the shorter render ends a silence sooner). A
    whole piece is never left, and a waiting piece with more to render does not displace one."""
    running = RequestView(0, 1, phonemes=200, planned=True, running=URGENT, leavable=True)
    listeners = [ListenerView(1), ListenerView(2)]
    newcomer = decide(snapshot(listeners, [running, RequestView(1, 2, phonemes=12)], urgent_free=0))
    assert newcomer.leave == {0} and newcomer.starts == ()
    whole = RequestView(0, 1, phonemes=200, planned=True, running=URGENT, leavable=False)
    assert decide(snapshot(listeners, [whole, RequestView(1, 2, phonemes=12)], urgent_free=0)).leave == set()
    longer = decide(snapshot(listeners, [running, RequestView(1, 2, phonemes=400)], urgent_free=0))
    assert longer.leave == set() and longer.starts == (Start(1, YIELDING, True, claims=True),)


def test_a_listener_that_displaces_a_run_starts_at_once_on_a_spare_urgent_worker() -> None:
    """Two monologues whose listeners ran dry hold the urgent workers; the spare one is taken
    only by a newcomer that outranks one of them (left at its next part if it is windowed),
    never by a third monologue with a longer render, which waits on a yielding worker."""
    listeners = [ListenerView(1), ListenerView(2), ListenerView(3)]
    monologues = [RequestView(k, k + 1, phonemes=200, planned=True, running=URGENT, leavable=True) for k in (0, 1)]
    hello = decide(snapshot(listeners, [*monologues, RequestView(2, 3, phonemes=12)], 1, 1, urgent_spare=1))
    assert hello.leave == {1} and hello.starts == (Start(2, URGENT, True),)
    third = decide(snapshot(listeners, [*monologues, RequestView(2, 3, phonemes=300)], 1, 1, urgent_spare=1))
    assert third.leave == set() and third.starts == (Start(2, YIELDING, True, claims=True),)
    whole = [replace(monologue, leavable=False) for monologue in monologues]
    beside_whole = decide(snapshot(listeners, [*whole, RequestView(2, 3, phonemes=12)], 1, 1, urgent_spare=1))
    assert beside_whole.leave == set() and beside_whole.starts == (Start(2, URGENT, True),)
    assert decide(snapshot(listeners[:1], [RequestView(0, 1, phonemes=12)], 1, 0, urgent_spare=1)) == Decisions()


def test_two_long_answers_at_once_share_the_urgent_workers_and_take_turns_by_slack() -> None:
    listeners = [ListenerView(1), ListenerView(2)]
    answers = [RequestView(0, 1, phonemes=150), RequestView(1, 2, phonemes=150)]
    assert decide(snapshot(listeners, answers)).starts == (Start(0, URGENT, True), Start(1, URGENT, True))
    # next pieces: whoever has less audio left goes first, whichever asked first
    ahead = [ListenerView(1, left_s=2.0), ListenerView(2, left_s=0.5)]
    assert decide(snapshot(ahead, answers, urgent_free=1, yielding_free=0)).starts[0].request == 1
    behind = [ListenerView(1, left_s=0.5), ListenerView(2, left_s=2.0)]
    assert decide(snapshot(behind, answers, urgent_free=1, yielding_free=0)).starts[0].request == 0


def test_three_long_answers_beyond_the_cores_degrade_alike() -> None:
    """Three listeners run dry with two urgent workers: the third starts on a yielding worker,
    windowed (its run still claims the cores: its listener is silent), and moves up at a part
    once an urgent worker is free or once it outranks a running urgent run, to the spare; the
    next round goes to whoever has the least audio, not to whoever was served first."""
    listeners = [ListenerView(key) for key in (1, 2, 3)]
    answers = [RequestView(key - 1, key, phonemes=150) for key in (1, 2, 3)]
    assert decide(snapshot(listeners, answers)).starts == (
        Start(0, URGENT, True), Start(1, URGENT, True), Start(2, YIELDING, True, claims=True),
    )
    third = RequestView(2, 3, phonemes=150, planned=True, running=YIELDING, leavable=True)
    assert decide(snapshot(listeners, [third], urgent_free=1)).leave == {2}
    served = [ListenerView(1, left_s=1.0), ListenerView(2), ListenerView(3)]
    again = decide(snapshot(served, answers, urgent_free=2, yielding_free=0))
    assert [start.request for start in again.starts] == [1, 2]
    # Its two rivals' audio began: it has less slack than either, so it takes the spare
    # urgent worker at its next part rather than wait, a part at a time, behind their runs.
    rivals = [RequestView(k - 1, k, phonemes=150, planned=True, running=URGENT, leavable=True) for k in (1, 2)]
    heard = [ListenerView(1, left_s=0.5), ListenerView(2, left_s=0.8), ListenerView(3)]
    assert decide(snapshot(heard, [*rivals, third], urgent_free=1, urgent_spare=1)).leave == {2}
    # while all three are silent it does not outrank them: the spare stays for a newcomer
    assert decide(snapshot(listeners, [*rivals, third], urgent_free=1, urgent_spare=1)).leave == set()


def test_a_listeners_next_request_renders_ahead_once_its_current_one_speaks() -> None:
    """Request 1 of the session renders ahead on a yielding worker, windowed (so that it can
    move up once it is needed), once request 0's audio has started: not before (its first
    audio comes first), not while request 0 waits for an urgent worker, not beyond the
    listener's share, and never a third."""
    listener = [ListenerView(1, 1.0)]
    speaking = RequestView(0, 1, phonemes=30, planned=True, spoken=True)
    requests = [speaking, RequestView(1, 1, phonemes=30), RequestView(2, 1, phonemes=9)]
    assert decide(snapshot(listener, requests)).starts == (Start(0, URGENT, True), Start(1, YIELDING, True))
    assert decide(snapshot(listener, requests, urgent_free=0)).starts == (Start(0, YIELDING, True, claims=True),)  # none ahead
    running = [replace(speaking, running=URGENT), *requests[1:]]
    assert decide(snapshot(listener, running, urgent_free=0)).starts == (Start(1, YIELDING, True),)
    silent = [replace(speaking, spoken=False), *requests[1:]]
    assert decide(snapshot(listener, silent)).starts == (Start(0, URGENT, True),)
    holding = [ListenerView(1, 1.0, held_bytes=Budgets().listener_budget_bytes)]
    assert decide(snapshot(holding, running)).starts == ()
    ahead = [running[0], replace(requests[1], planned=True, running=YIELDING, leavable=True)]
    assert decide(snapshot(holding, ahead)).leave == {1}  # rendering ahead stops at a part once the share is spent
    assert decide(snapshot(listener, ahead)).leave == set()


def test_the_byte_budgets_hold_a_listener_back() -> None:
    budgets = Budgets(listener_budget_bytes=1_000, buffer_budget_bytes=3_000)

    def starts(held: int, others_held: int = 0, ahead: int = 0) -> int:
        """``held`` bytes of the request's own (sent before its next piece), ``ahead`` of a
        request after it that rendered ahead."""
        listeners = [ListenerView(1, held_bytes=held + ahead), ListenerView(2, held_bytes=others_held)]
        request = RequestView(0, 1, phonemes=30, planned=True, held_before=held)
        return len(decide(snapshot(listeners, [request], budgets=budgets)).starts)

    assert starts(0) == starts(999) == 1
    assert starts(1_000) == 0  # its share (min of its own budget and the server's split two ways)
    assert starts(999, others_held=2_100) == 0  # the server-wide budget is spent
    assert starts(0, others_held=10_000) == 1  # a listener holding nothing may always render
    # the bytes of a request rendered ahead go out after this one's: they never hold it back
    assert starts(0, ahead=5_000) == 1 and starts(1, ahead=5_000) == 0


def test_a_request_waiting_past_stale_after_is_stale_unless_a_piece_was_taken() -> None:
    budgets = Budgets(stale_after_s=5.0, listener_budget_bytes=1_000, buffer_budget_bytes=10**6)
    listeners = [ListenerView(1), ListenerView(2), ListenerView(3, held_bytes=1_000)]
    requests = [
        RequestView(0, 1, phonemes=30, waited_s=6.0),  # due, unplanned, too long: stale
        RequestView(1, 2, phonemes=30, waited_s=6.0, planned=True, spoken=True),  # speaking already
        RequestView(2, 2, phonemes=30, waited_s=60.0),  # behind request 1: not due (it renders ahead)
        RequestView(3, 3, phonemes=30, waited_s=6.0, held_before=1_000),  # parked by its budget: stale all the same
    ]
    decisions = decide(snapshot(listeners, requests, budgets=budgets))
    assert decisions.stale == {0, 3}
    assert [start.request for start in decisions.starts] == [1, 2]


@pytest.mark.parametrize(
    ("one_thread", "held"),
    [(0.03, False), (0.049, False), (0.055, True), (0.075, True)],
    ids=["2.5x real time", "1.53x: just in hand", "1.36x", "real time"],
)
def test_a_first_part_is_held_for_the_second_when_one_thread_cannot_keep_its_slack_in_hand(
    one_thread: float, held: bool
) -> None:
    """The second window is as long as the first, and renders while only the first plays: with
    75 ms of audio a phoneme, a thread that renders a phoneme in 49 ms makes 0.5 s of audio in
    about a third of a second, slack in hand by `MARGIN`; slower, the first part waits for the
    second. Two threads' pace does not count: a crowded run goes on with one."""
    pace = PaceTable(((1, one_thread), (2, 0.001)), audio_per_phoneme=0.075)
    assert holds_start(0.5, pace, 1) is held
    assert holds_start(0.5, pace, 2) is False
    assert holds_start(0.0, pace, 1) is False  # a part with no audio is not what the listener waits for


def test_a_first_part_is_held_while_no_run_is_measured() -> None:
    """Right after a start every figure is a prior, no machine's pace (its one thread would keep
    its slack in hand): a crowded first part waits for its second until a run is measured."""
    assert not PaceTable().measured and PaceTable(((1, 0.03),)).measured
    assert holds_start(0.5, PaceTable(), 1) is True
    assert holds_start(0.5, PaceTable(((1, 0.03),)), 1) is False  # the same figure, measured: in hand
    assert holds_start(0.0, PaceTable(), 1) is False
