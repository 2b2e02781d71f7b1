"""`bench voice` on one spoken question and one barge-in: the real speech server, agent
(SmolLM2, Silero VAD, Whisper) and Realtime socket; the marks exist, are finite and come in
the order the server sends them."""

from __future__ import annotations

import math

from voicestream.audio import pcm16_to_float
from voicestream.bench.asr import transcribe
from voicestream.bench.voice import STAGES, measure_voice
from voicestream.engine import KokoroEngine


def test_one_spoken_turn_and_one_barge_in(engine: KokoroEngine) -> None:
    report = measure_voice(
        engine,
        questions=("What is rain?",),
        interruptions=("What do bees eat?",),
        transcribe=lambda pcm, rate: transcribe(pcm16_to_float(pcm), rate),
        max_tokens=20,
        interrupt_after_s=0.0,
        warm_up=False,
    )

    (turn,) = report.turns
    assert turn.status == "completed" and turn.answer.strip() and turn.audio
    assert "rain" in turn.heard.lower()
    marks = turn.marks()
    assert all(m is not None and math.isfinite(m) for m in marks), marks
    vad, transcribed, created, first_token, first_audio = marks
    assert 0 < vad <= transcribed <= created <= first_audio  # one socket, in the server's order
    assert 0 < first_token <= first_audio  # the answer's audio needs its text
    assert turn.wer is not None and turn.wer >= 0

    (barge_in,) = report.barge_ins
    assert barge_in.status in ("cancelled", "completed")
    assert 0 < barge_in.speech_started_ms and math.isfinite(barge_in.last_audio_ms)
    assert math.isfinite(barge_in.done_ms)
    if barge_in.status == "cancelled":
        assert barge_in.audio_after_done == 0

    voice, summary, barge = report.to_report().tables
    assert voice.columns[1:6] == list(STAGES) and len(voice.rows) == 1
    assert summary.column("turns") == [1] * len(STAGES)
    assert barge.column("status") == [barge_in.status]
