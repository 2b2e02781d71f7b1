"""What every bench produces: tables on stdout, the same data as JSON, a PNG chart, progress.

A bench builds one :class:`Report` (tables, charts, notes, the machine's context) and hands
it to :func:`publish`, which prints each table as a Markdown-compatible rich table (ready
to paste into docs/BENCHMARKS.md), and writes ``--json FILE`` and ``--plot FILE`` when
asked. Long measurements report progress with :func:`progress`, on stderr, so that stdout
stays the table alone.

The machine is shared and noisy, so the report records the load average before and after
the run: figures are compared only within one run.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable

Cell = str | int | float | None


@dataclass
class Table:
    """One table: what it measures (``title``), its columns and rows, and its verdict (``note``)."""

    title: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    note: str = ""

    def add(self, *row: Cell) -> None:
        if len(row) != len(self.columns):
            raise ValueError(f"{self.title!r}: a row has {len(row)} cells for {len(self.columns)} columns")
        self.rows.append(list(row))

    def column(self, name: str) -> list[Cell]:
        index = self.columns.index(name)
        return [row[index] for row in self.rows]


@dataclass
class Chart:
    """One panel of the PNG: ``series`` name -> one value per category (None: not measured).

    ``kind="bar"`` draws grouped bars over categorical ``categories``; ``kind="line"``
    draws lines over numeric ones (concurrency, input length).
    """

    title: str
    categories: list[str | int | float]
    series: dict[str, list[float | None]]
    ylabel: str
    xlabel: str = ""
    kind: Literal["bar", "line"] = "bar"
    log_y: bool = False


@dataclass
class Report:
    """A bench's whole result; ``context`` holds its settings (trials, voice, text lengths...)."""

    bench: str
    tables: list[Table] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    context: dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "bench": self.bench,
            "context": self.context,
            "tables": [asdict(table) for table in self.tables],
            "charts": [asdict(chart) for chart in self.charts],
            "notes": self.notes,
        }


def machine_context() -> dict[str, object]:
    """What the figures depend on: CPUs usable by this process, the platform, whether the
    engine's convolutions run as VNNI matrix products (`voicestream.engine.conv_gemm`: about
    1.5x faster renders), the load average."""
    from voicestream.engine.conv_gemm import exact_on_this_cpu

    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpus": usable,
        "machine": platform.machine(),
        "vnni_convolutions": exact_on_this_cpu(),
        "python": platform.python_version(),
        "load_average_before": _load_average(),
    }


def _load_average() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()] if hasattr(os, "getloadavg") else []


def format_cell(value: Cell) -> str:
    """Numbers as people read them: thousands separated, 3 decimals below 10, 1 above."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def render_table(table: Table) -> RichTable:
    rich_table = RichTable(box=box.MARKDOWN)
    for index, name in enumerate(table.columns):
        rich_table.add_column(name, justify="left" if index == 0 else "right")
    for row in table.rows:
        rich_table.add_row(*(format_cell(value) for value in row))
    return rich_table


def print_report(report: Report, console: Console | None = None) -> None:
    """Markdown: a heading per table, the table, its note; ready to paste into docs/BENCHMARKS.md."""
    console = console or Console(width=400)
    context = ", ".join(f"{key} {value}" for key, value in report.context.items())
    console.print(f"bench {report.bench}: {context}", highlight=False, soft_wrap=True, markup=False)
    for table in report.tables:
        console.print(f"\n### {table.title}\n", highlight=False, soft_wrap=True, markup=False)
        console.print(render_table(table))
        if table.note:
            console.print(f"\n{table.note}", highlight=False, soft_wrap=True, markup=False)
    for note in report.notes:
        console.print(f"\n{note}", highlight=False, soft_wrap=True, markup=False)


def write_json(report: Report, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n")


def write_plot(report: Report, path: Path) -> None:
    """Every chart of the report as one panel of a PNG (matplotlib, Agg: no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    charts = report.charts or [_fallback_chart(report)]
    figure, axes = plt.subplots(1, len(charts), figsize=(5.5 * len(charts), 4.2), squeeze=False)
    for ax, chart in zip(axes[0], charts, strict=True):
        _draw(ax, chart)
    figure.suptitle(f"voicestream bench {report.bench}", fontsize=11)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _draw(ax, chart: Chart) -> None:
    labels = [str(category) for category in chart.categories]
    if chart.kind == "line":
        for name, values in chart.series.items():
            points = [(x, y) for x, y in zip(chart.categories, values, strict=True) if y is not None]
            ax.plot([x for x, _ in points], [y for _, y in points], marker="o", label=name)
    else:
        width = 0.8 / max(1, len(chart.series))
        for index, (name, values) in enumerate(chart.series.items()):
            positions = [i + (index - (len(chart.series) - 1) / 2) * width for i in range(len(labels))]
            heights = [0.0 if value is None else value for value in values]
            ax.bar(positions, heights, width, label=name)
        ax.set_xticks(range(len(labels)), labels, rotation=15 if max(map(len, labels), default=0) > 8 else 0)
    if chart.log_y:
        ax.set_yscale("log")
    ax.set_title(chart.title, fontsize=10)
    ax.set_ylabel(chart.ylabel)
    ax.set_xlabel(chart.xlabel)
    ax.grid(axis="y", alpha=0.3)
    if len(chart.series) > 1:
        ax.legend(fontsize=8)


def _fallback_chart(report: Report) -> Chart:
    """A report without charts still plots: its first table's first numeric column."""
    table = report.tables[0]
    index = next(i for i, value in enumerate(table.rows[0]) if isinstance(value, int | float) and i > 0)
    return Chart(
        title=table.title,
        categories=[str(row[0]) for row in table.rows],
        series={table.columns[index]: [row[index] for row in table.rows]},  # type: ignore[misc]
        ylabel=table.columns[index],
    )


def publish(report: Report, json_path: Path | None = None, plot_path: Path | None = None) -> None:
    """Print the report; write its JSON and PNG where asked. Records the load average after the run."""
    report.context["load_average_after"] = _load_average()
    print_report(report)
    if json_path is not None:
        write_json(report, json_path)
    if plot_path is not None:
        write_plot(report, plot_path)


class Advance(Protocol):
    def __call__(self, steps: int = 1) -> None: ...


@contextmanager
def progress(description: str, total: int, console: Console | None = None) -> Iterator[Advance]:
    """A progress bar on stderr for ``total`` steps; yields the function that advances it."""
    bar = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console or Console(stderr=True), transient=True,
    )
    task = bar.add_task(description, total=total)

    def advance(steps: int = 1) -> None:
        bar.advance(task, steps)

    with bar:
        yield advance

