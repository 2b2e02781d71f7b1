"""`bench encoding` runs on two clips: compressed formats are smaller and still understood."""

from __future__ import annotations

from voicestream.bench.encoding import measure_encoding
from voicestream.engine import KokoroEngine


def test_encoding_bench_on_two_clips(engine: KokoroEngine) -> None:
    report = measure_encoding(engine, clips=("Hello there.", "Your order number is 12."))

    table = report.tables[0]
    raw = dict(zip(table.column("format"), table.column("bytes"), strict=True))
    pcm, mp3 = raw["raw PCM (s16le, 24 kHz)"], raw["MP3 48 kb/s"]
    assert mp3 < pcm / 4
    assert all(1.33 < b64 / size < 1.34 for size, b64 in zip(table.column("bytes"), table.column("base64 bytes")))
    assert 380 < table.column("kb/s")[0] < 390  # 24 kHz 16-bit mono is 384 kb/s
    assert all(wer <= 25 for wer in table.column("WER %")), table.rows
