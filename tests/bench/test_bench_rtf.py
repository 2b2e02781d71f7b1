"""`bench rtf` runs on a tiny input and its report survives the JSON and PNG round trip."""

from __future__ import annotations

import json
from pathlib import Path

from voicestream.bench.report import publish
from voicestream.bench.rtf import measure_rtf
from voicestream.engine import KokoroEngine


def test_rtf_bench_measures_each_input_and_thread_count(engine: KokoroEngine, tmp_path: Path, capsys) -> None:
    report = measure_rtf(engine.files, thread_counts=(1, 2), trials=1, inputs={"tiny": "Hi there."})

    table = report.tables[0]
    assert table.column("run on") == ["cpu, 1 thread", "cpu, 2 threads"]
    assert all(0 < rtf < 20 for rtf in table.column("RTF median"))
    assert all(audio_s > 0.3 for audio_s in table.column("audio s"))
    assert any("CUDA" in note for note in report.notes) or len(table.rows) > 2

    publish(report, tmp_path / "rtf.json", tmp_path / "rtf.png")
    printed = capsys.readouterr().out
    assert "Engine real-time factor" in printed and "cpu, 2 threads" in printed
    written = json.loads((tmp_path / "rtf.json").read_text())
    assert written["tables"][0]["rows"] == table.rows
    assert written["context"]["load_average_after"]
    assert (tmp_path / "rtf.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
