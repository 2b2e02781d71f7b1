"""`bench voice` on one spoken question, one hesitant question and one barge-in, with
`semantic_vad`: the real speech server, agent (SmolLM2, Silero VAD, Smart Turn, Whisper) and
Realtime socket; the marks exist, are finite and come in the order the server sends them, and
the hesitation is one turn."""

from __future__ import annotations

import math

from voicestream.audio import pcm16_to_float
from voicestream.bench.asr import transcribe
from voicestream.bench.voice import STAGES, Hesitation, measure_voice
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
        detections=("semantic_vad",),
        hesitations=(Hesitation("What is the capital of Spain?", 5, 700),),
    )

    (turn,) = report.whole
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

    (hesitant,) = report.hesitant
    assert (hesitant.pause_ms, hesitant.cut_ins, hesitant.status) == (700, 0, "completed")
    assert "spain" in hesitant.heard.lower() and hesitant.first_audio_ms is not None

    voice, summary, hesitations, barge = report.to_report().tables
    assert voice.columns[2:7] == list(STAGES) and len(voice.rows) == 1
    assert summary.column("turns") == [1] * len(STAGES)
    assert hesitations.column("cut-ins") == [0]
    assert barge.column("status") == [barge_in.status]
