"""``--cpu-durations=N``: the N test phases that took the most CPU time, beside pytest's
``--durations`` (wall time).

On a loaded or two-core machine wall time says more about the neighbours than about the
test; CPU time is what a test costs the suite. Each phase counts its worker's own CPU time
(every thread: ONNX Runtime's, llama.cpp's) and that of the child processes it waited for (a
`voicestream serve` process counts in the teardown that ends it). Works under pytest-xdist:
each worker stamps its reports, the controller adds them up.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Generator

import pytest

CPU_KEY = "cpu_s"


def cpu_seconds() -> float:
    """User and system CPU time of this process and its waited-for children."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-durations", type=int, default=None, metavar="N",
        help="list the N test phases that took the most CPU time (0: all)",
    )


def pytest_configure(config: pytest.Config) -> None:
    count = config.getoption("cpu_durations")
    if count is not None:
        config.pluginmanager.register(CpuProfile(count), "cpu-durations")


class CpuProfile:
    """Stamps each phase's report with its CPU time (on a worker) and lists the largest (on
    the controller, or in a run without workers)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.mark = cpu_seconds()
        self.taken: list[tuple[float, str]] = []

    def pytest_runtest_logstart(self) -> None:
        self.mark = cpu_seconds()  # collection and the time between tests count for none

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self) -> Generator[None, pytest.TestReport]:
        outcome = yield
        now = cpu_seconds()
        outcome.get_result().user_properties.append((CPU_KEY, now - self.mark))
        self.mark = now

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        taken = dict(report.user_properties).get(CPU_KEY)
        if isinstance(taken, float):
            self.taken.append((taken, f"{taken:8.2f}s {report.when:<8} {report.nodeid}"))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.taken:
            return  # a worker: its reports went to the controller
        taken = sorted(self.taken, reverse=True)
        total = sum(t for t, _ in taken)
        terminalreporter.write_sep("=", f"slowest {self.count or 'all'} CPU durations ({total:.1f} s in all)")
        for _, line in taken[: self.count or None]:
            terminalreporter.write_line(line)
