"""The end of a turn without a socket: the words' verdict as a table, Smart Turn's features
against pipecat's own extractor, and the input buffer's turn events, held at a pause until its
verdict, on real speech (the engine's, through the speech server) and the real Silero VAD."""

from __future__ import annotations

import numpy as np
import pytest
from tests.agent.realtime_checks import silence, spoken, trimmed

from voicestream.agent.realtime.end_of_turn import (
    SmartTurn,
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


def test_a_judged_pause_holds_the_audio_after_it_until_its_verdict(speech_server):
    """Semantic: a question and 1.5 s of silence, appended at once, stop at the pause (the
    rest not heard yet); judged finished, the turn ends where its silence reaches the
    eagerness's confirmation (1,000 ms) and is taken without the audio after that, which is
    then heard as the next turn's silence."""
    vad = SemanticVad()
    audio = InputAudio("audio/pcm", vad)
    question = trimmed(spoken(speech_server, "What is the capital of France?"))
    events = audio.append(silence(0.5) + question + silence(1.5))
    assert [type(e) for e in events] == [SpeechStart, Pause]
    pause = events[-1]
    assert audio.holding == pause and audio.held_ms < audio.ms - audio.start_ms - 500
    assert audio.go_on(Verdict.FINISHED) == [SpeechStop(pause.ms)]
    heard_ms = len(audio.take()) / 16
    assert pause.ms + vad.confirm_ms <= heard_ms <= pause.ms + vad.confirm_ms + WINDOW_MS, "not the rest"
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
        events = audio.append(silence(0.3) + sentence + silence(0.3) + pcm(click) + silence(0.3) + sentence + silence(0.2))
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
