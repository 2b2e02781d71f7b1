"""`bench e2e` runs on a tiny input, and its word error rate normalizes both sides."""

from __future__ import annotations

from voicestream.bench.e2e import measure_e2e
from voicestream.bench.wer import word_error_rate
from voicestream.engine import KokoroEngine


def test_word_error_rate_uses_whisper_normalization() -> None:
    assert word_error_rate("It costs 12 dollars, Mr. Smith.", "it costs twelve dollars mister smith") == 0.0
    assert word_error_rate("The colour is red.", "the color is blue") == 0.25
    assert word_error_rate("the cat sat down", "the sat down") == 0.25


def test_latency_against_sentence_mode_on_one_prompt(engine: KokoroEngine) -> None:
    prompt = "What is a black hole?"
    report = measure_e2e(
        engine, prompts=(prompt,), modes=(), trials=1, transcribe=lambda pcm, rate: "", max_tokens=20
    )
    (comparison,) = report.comparisons
    assert comparison.same_answer, "the seeded LLM gives both modes the same answer"
    assert comparison.latency.error is None and comparison.sentence.error is None
    assert comparison.ratio is not None and comparison.latency.first_audio_ms is not None
    assert comparison.latency_wer == 1.0  # nothing heard: every word missed
    published = report.to_report()
    assert published.tables[-1].column("prompt") == [prompt]
    assert any("median first-audio ratio" in note for note in published.notes)
