"""The end of a turn without a socket: the words' verdict as a table, the words' model (the
local LLM's SmolLM2) on questions cut after a word and whole ones, Smart Turn's features
against pipecat's own extractor, and the input buffer's turn events, held at a pause until its
verdict, on real speech (the engine's, through the speech server) and the real Silero VAD."""

from __future__ import annotations

import numpy as np
import pytest
from tests.agent.realtime_checks import silence, spoken, trimmed

from voicestream.agent.realtime.end_of_turn import (
    TEXT_FINISHED_PROBABILITY,
    SmartTurn,
    TextTurn,
    TurnModelUnavailable,
    Verdict,
    model_path,
    trails_off,
    verdict,
)
from voicestream.agent.realtime.turns import InputAudio
from voicestream.agent.realtime.vad import (
    WINDOW_MS,
    NoWords,
    Pause,
    Resumed,
    SpeechStart,
    SpeechStop,
)
from voicestream.audio import float_to_pcm16
from voicestream.protocol.realtime import SemanticVad, ServerVad


@pytest.mark.parametrize(
    ("transcript", "probability", "expected"),
    [
        ("What is the capital of France?", 0.9, Verdict.FINISHED),
        ("What is the capital of France?", 0.2, Verdict.GOES_ON),  # the voice says more is coming
        ("How many legs does...", 0.94, Verdict.GOES_ON),  # Whisper hears it trail off
        ("What is the capital of?", 0.9, Verdict.GOES_ON),  # "of" leaves it open
        ("What is the capital of", 0.9, Verdict.GOES_ON),  # no closing punctuation
        ("I went to the store and", 0.9, Verdict.GOES_ON),
        ("Tell me about the moon, but", 0.9, Verdict.GOES_ON),
        ("So I was thinking,", 0.9, Verdict.GOES_ON),
        ("I would like to go to the.", 0.9, Verdict.GOES_ON),
        ('He said "hello."', 0.9, Verdict.FINISHED),  # closing quotes are not the end
        ("What is this for?", 0.9, Verdict.FINISHED),  # a question may end on a preposition
        ("", 0.99, Verdict.NO_WORDS),
        ("[BLANK_AUDIO]", 0.99, Verdict.NO_WORDS),
        ("(coughs)", 0.99, Verdict.NO_WORDS),
        (None, 0.6, Verdict.FINISHED),  # Whisper could not say: the audio alone
        (None, 0.4, Verdict.GOES_ON),
    ],
)
def test_the_words_can_keep_a_turn_open_and_the_audio_decides_the_rest(
    transcript, probability, expected
):
    assert verdict(probability, transcript) is expected


@pytest.mark.parametrize(
    ("transcript", "probability", "text_probability", "expected"),
    [
        ("What is the capital of France?", 0.9, 0.81, Verdict.SURE),  # both: the short confirmation
        ("what is the capital of france", 0.9, 0.81, Verdict.SURE),  # the model reads no punctuation
        ("Who painted.", 0.93, 0.02, Verdict.FINISHED),  # the audio alone: the longer one
        ("Why is the sky blue?", 0.3, 0.5, Verdict.FINISHED),  # the words alone
        ("How far away is", 0.3, 0.001, Verdict.GOES_ON),
        ("I went to the store and", 0.9, 0.9, Verdict.GOES_ON),  # the rules come first
        ("So I was thinking,", 0.9, 0.9, Verdict.GOES_ON),
        ("[BLANK_AUDIO]", 0.9, 0.9, Verdict.NO_WORDS),
    ],
)
def test_the_words_model_makes_a_verdict_sure_where_the_audio_agrees(
    transcript, probability, text_probability, expected
):
    assert verdict(probability, transcript, text_probability) is expected


CUT_QUESTIONS = (
    "How many legs does",
    "What is the capital of",
    "Can you tell me why",
    "Who painted",
    "How far away is",
    "Who wrote",
    "I want to know",
)
"""Questions cut after a word (`bench voice`'s hesitations among them), as Whisper may write
them: with a guessed "?" or "."."""
WHOLE_QUESTIONS = (
    "What is the capital of France?",
    "Who painted the Mona Lisa?",
    "Who wrote Romeo and Juliet",
    "How far away is the moon from the earth?",
    "Why do cats purr",
    "Tell me a joke.",
    "Yes.",
)


def test_the_words_model_tells_a_question_cut_after_a_word_from_a_whole_one():
    """SmolLM2 on the words alone, their punctuation ignored: every cut question below the
    cut, every whole one (with or without a "?") at or above it; each run counted."""
    model = TextTurn.load()
    before = model.runs
    cut = {text: model.probability(f"{text}?") for text in CUT_QUESTIONS}
    whole = {text: model.probability(text) for text in WHOLE_QUESTIONS}
    assert max(cut.values()) < TEXT_FINISHED_PROBABILITY, cut
    assert min(whole.values()) >= TEXT_FINISHED_PROBABILITY, whole
    assert model.probability("Who painted.") == pytest.approx(cut["Who painted"])
    assert model.probability("(coughs)") == 0.0
    assert model.runs - before == len(CUT_QUESTIONS) + len(WHOLE_QUESTIONS) + 1
    assert model.cpu_s > 0


def test_the_words_model_can_be_turned_off_or_missing(tmp_path):
    with pytest.raises(TurnModelUnavailable):
        TextTurn.load("off")
    with pytest.raises(TurnModelUnavailable):
        TextTurn.load(str(tmp_path / "nothing.gguf"))
    assert TextTurn.load_optional("off") is None


def test_trailing_off_is_read_from_the_end_of_the_words():
    assert trails_off("Well…") and trails_off("and then -") and trails_off("because")
    assert not trails_off("Yes.") and not trails_off("Where are you from?")


def test_smart_turns_features_are_pipecats_on_a_fixed_signal():
    """faster-whisper's extractor, as `SmartTurn.features` runs it, gives pipecat's own
    numbers (vendored from `transformers`' WhisperFeatureExtractor) on the same 8 s."""
    from pipecat.audio.turn.smart_turn._whisper_features import compute_whisper_log_mel_features

    rng = np.random.default_rng(0)
    t = np.arange(6 * 16000) / 16000
    chirp = 0.3 * np.sin(2 * np.pi * 220 * t * (1 + 0.1 * t)) + 0.05 * rng.standard_normal(t.size)
    samples = chirp.astype(np.float32)
    padded = np.concatenate([np.zeros(2 * 16000, np.float32), samples])
    ours = SmartTurn.load().features(samples)
    assert ours.shape == (80, 800)
    np.testing.assert_allclose(ours, compute_whisper_log_mel_features(padded), atol=1e-4)


def test_the_model_is_found_in_pipecat_or_where_it_is_configured(tmp_path):
    assert model_path().name == "smart-turn-v3.2-cpu.onnx"
    with pytest.raises(TurnModelUnavailable):
        model_path(str(tmp_path / "nothing.onnx"))


def pcm(samples: np.ndarray) -> bytes:
    return float_to_pcm16(samples.astype(np.float32)).tobytes()


@pytest.mark.parametrize("judged", [Verdict.FINISHED, Verdict.SURE])
def test_a_judged_pause_holds_the_audio_after_it_until_its_verdict(speech_server, judged):
    """Semantic: a question and 1.5 s of silence, appended at once, stop at the pause (the
    rest not heard yet); judged finished, the turn ends where its silence reaches the
    eagerness's confirmation (1,000 ms; 300 ms judged sure) and is taken without the audio
    after that, which is then heard as the next turn's silence."""
    vad = SemanticVad()
    wait_ms = vad.sure_ms if judged is Verdict.SURE else vad.confirm_ms
    assert (vad.confirm_ms, vad.sure_ms) == (1000, 300)
    audio = InputAudio("audio/pcm", vad)
    question = trimmed(spoken(speech_server, "What is the capital of France?"))
    events = audio.append(silence(0.5) + question + silence(1.5))
    assert [type(e) for e in events] == [SpeechStart, Pause]
    pause = events[-1]
    assert audio.holding == pause and audio.held_ms < audio.ms - audio.start_ms - 500
    assert audio.go_on(judged) == [SpeechStop(pause.ms)]
    heard_ms = len(audio.take()) / 16
    assert pause.ms + wait_ms <= heard_ms <= pause.ms + wait_ms + WINDOW_MS, "not the rest"
    assert audio.go_on() == [] and audio.holding is None and not audio.speaking


def test_speech_within_the_confirmation_resumes_a_turn_judged_finished(speech_server):
    """Judged finished at its pause, the turn is not over while its silence is shorter than
    the confirmation: speech 700 ms after it is `Resumed` (no stop), a click is not; with
    `eagerness` high (400 ms) the same pause ends the turn."""
    sentence = trimmed(spoken(speech_server, "I have a question about France."))
    click = np.zeros(2400, np.float32)
    click[:24] = 0.8
    for eagerness, ends in (("auto", False), ("high", True)):
        audio = InputAudio("audio/pcm", SemanticVad(eagerness=eagerness))
        events = audio.append(silence(0.3) + sentence + silence(0.3) + pcm(click) + silence(0.3) + sentence + silence(0.5))
        pause = events[-1]
        assert isinstance(pause, Pause), events
        after = audio.go_on(Verdict.FINISHED)
        if ends:
            assert after[0] == SpeechStop(pause.ms), after
        else:
            assert [type(e) for e in after] == [Resumed, Pause], after  # the second sentence's pause
            assert after[0].ms >= pause.ms + 600


def test_an_unfinished_turn_ends_at_the_eagerness_longest_pause(speech_server):
    audio = InputAudio("audio/pcm", SemanticVad(eagerness="high"))
    unfinished = trimmed(spoken(speech_server, "What is the capital of"))
    pause = audio.append(unfinished + silence(1.0))[-1]
    assert isinstance(pause, Pause)
    assert audio.go_on(Verdict.GOES_ON) == [] and audio.holding is None and audio.speaking
    assert audio.append(silence(1.2)) == [SpeechStop(pause.ms)]


def test_no_words_end_a_turn_that_was_never_one(speech_server):
    audio = InputAudio("audio/pcm", SemanticVad())
    pause = audio.append(trimmed(spoken(speech_server, "Hm.")) + silence(0.5))[-1]
    assert audio.go_on(Verdict.NO_WORDS) == [NoWords(pause.ms)]
    audio.clear()
    assert audio.go_on() == [] and not audio.speaking


def test_a_beep_starts_server_vads_turn_but_not_semantic_vads():
    """A pulsing chord that Silero scores as speech for one window: server VAD starts a turn
    on it, semantic VAD waits for three windows in a row."""
    t = np.arange(2 * 24000) / 24000
    pulse = 0.5 + 0.5 * np.sin(4 * np.pi * t)
    chord = 0.2 * sum(np.sin(2 * np.pi * f * t) for f in (440, 554, 659)) * pulse
    beep = pcm(np.concatenate([np.zeros(4800), chord, np.zeros(4800)]))
    assert SpeechStart in [type(e) for e in InputAudio("audio/pcm", ServerVad()).append(beep)]
    assert InputAudio("audio/pcm", SemanticVad()).append(beep) == []
