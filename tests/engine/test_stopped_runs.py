"""A model run stopped between two nodes: by a more urgent claim of the cores (made again,
the same samples) or because its request ended (`RunStopped`), on the real model."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest

from voicestream.cpus import CPU_USE
from voicestream.engine import KokoroEngine, Piece
from voicestream.engine.memory import RunStop, RunStopped, stopping
from voicestream.engine.offline import render_whole

TEXT = "The travellers pass the mills and the old stone bridges, until night falls over the valley."
VOICE = "af_heart"


@pytest.fixture(scope="module")
def piece(engine: KokoroEngine) -> Piece:
    """One whole piece of about five seconds: one model run of a second or more on one thread."""
    (only,) = engine.plan(TEXT, cut_first_clause=False)
    return only


def _until(condition: Callable[[], bool], thread: threading.Thread) -> None:
    """Wait, polling, until ``condition()`` holds while ``thread`` still runs."""
    while not condition():
        assert thread.is_alive(), "the run ended before it could be stopped"
        threading.Event().wait(0.001)


def test_a_ranked_run_stopped_for_first_words_is_made_again_with_the_same_samples(engine: KokoroEngine, piece: Piece) -> None:
    """A one-thread run ahead of need (`CpuUse.ranked`) is stopped when a new request's
    first words claim the cores, waits for them, and renders again: the audio is the one run's."""
    alone = render_whole(engine, piece, VOICE, 1.0).audio
    made: list[np.ndarray] = []

    def ranked() -> None:
        with CPU_USE.ranked(2):
            made.append(render_whole(engine, piece, VOICE, 1.0).audio)

    before = CPU_USE.interrupted
    thread = threading.Thread(target=ranked)
    thread.start()
    _until(lambda: CPU_USE.stoppable == 1, thread)
    with CPU_USE.claim_urgent(engine.max_threads):  # first words: the run stops now
        assert CPU_USE.interrupted == before + 1
    thread.join(60)
    assert len(made) == 1 and np.array_equal(made[0], alone)


def test_a_run_whose_request_ended_stops_with_run_stopped(engine: KokoroEngine, piece: Piece) -> None:
    """Under `stopping`, `RunStop.stop` ends the run going between two nodes: `RunStopped`,
    and a later run under the same stop does not start."""
    stop, raised = RunStop(), []

    def rendering() -> None:
        with stopping(stop):
            for _ in range(2):
                try:
                    render_whole(engine, piece, VOICE, 1.0)
                except RunStopped as error:
                    raised.append(str(error))

    thread = threading.Thread(target=rendering)
    thread.start()
    _until(lambda: stop.going == 1, thread)
    stop.stop()
    thread.join(60)
    assert raised == ["the run's request ended while it rendered", "the run's request ended before it started"]
