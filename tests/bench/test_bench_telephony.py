"""`bench telephony`'s arithmetic on its own (a whole run takes minutes of real-time speech):
the goals' table and its verdicts, the ratios, the pooled WER, the idle calls' share of a core,
when a stand-in says the caller said a sample, and the echo LLM's answer."""

from __future__ import annotations

import pytest

from voicestream.bench.carrier import CARRIERS, StandIn
from voicestream.bench.telephony import (
    CallBargeIn,
    EchoModel,
    IdleCalls,
    Question,
    TelephonyReport,
    median,
    ratio,
    within,
)
from voicestream.bench.wer import pooled_word_error_rate


def test_ratios_and_their_verdicts():
    assert ratio(1150.0, 1000.0) == pytest.approx(1.15)
    assert ratio(None, 1000.0) is None and ratio(5.0, 0.0) is None
    assert within(1150.0, 1000.0, 1.15) and not within(1151.0, 1000.0, 1.15)
    assert within(0.0, 0.0, 1.5) and not within(0.1, 0.0, 1.5)  # 0 against 0 is within; more is not
    assert within(None, 1.0, 1.5) is None
    assert median([3.0, None, 1.0, 2.0]) == 2.0 and median([None]) is None


def test_the_pooled_wer_weighs_each_word_once():
    pairs = [("What is a black hole?", "What is a black hole"), ("Why is the sky blue?", "Why is the sky glue")]
    assert pooled_word_error_rate(pairs) == pytest.approx(1 / 10)
    assert pooled_word_error_rate([("Who wrote Romeo and Juliet?", "who wrote romeo and juliet")]) == 0.0


def report(call_heard: str = "Why is the sky blue?", clear_ms: float | None = 180.0,
           slower_ms: float = 1700.0) -> TelephonyReport:
    questions = [
        Question("What is a black hole?", 1500.0, 1400.0, "What is a black hole?", "What is a black hole?"),
        Question("Why is the sky blue?", slower_ms, 1400.0, call_heard, "Why is the sky blue?"),
    ]
    barge_in = CallBargeIn("q", "i", clear_ms, 1240.0, 1200.0)
    return TelephonyReport(questions, [barge_in], IdleCalls(10, 10.0, 2.0, 0.5), {}, [])


def verdicts(table) -> dict[str, object]:
    return dict(zip(table.column("goal"), table.column("met"), strict=True))


def test_the_goals_table_judges_each_goal():
    met = verdicts(report().goals())

    assert met["call / realtime"] is True  # medians 1,600 against 1,400 ms: 1.14x
    assert met["barge-in: speech starts → clear, worst ms"] is True
    assert met["kept − played of the cut answer, worst ms"] is True  # 40 ms short
    assert met["WER call / realtime"] is True  # 0 against 0
    assert met["10 calls of silence: agent CPU, % of one core"] is True  # 20 % of one core

    worse = verdicts(report(call_heard="Why is the sky glue?", clear_ms=None, slower_ms=1800.0).goals())
    assert worse["call / realtime"] is False  # 1,650 against 1,400 ms: 1.18x
    assert worse["WER call / realtime"] is False
    assert worse["barge-in: speech starts → clear, worst ms"] is False  # no clear came


def test_the_medians_and_ratio_in_the_goals_table():
    table = report().goals()
    measured = dict(zip(table.column("goal"), table.column("measured"), strict=True))

    assert measured["voice to voice, call, median ms"] == 1600
    assert measured["voice to voice, /v1/realtime pcm16, median ms"] == 1400
    assert measured["call / realtime"] == pytest.approx(1.14)
    assert measured["kept − played of the cut answer, worst ms"] == -40
    assert [t.title for t in report().to_report().tables][1:] == [
        "Each question: voice to voice (ms after its last word) and what the agent heard",
        "Barge-in on the call: the caller speaks over the answer",
        "Calls that only send silence (greetings played), CPU over the window",
    ]


def test_the_plot_draws_each_questions_voice_to_voice_on_each_face(tmp_path):
    from voicestream.bench.report import write_plot

    (chart,) = report().to_report().charts
    assert chart.series == {"call (mu-law, 8 kHz)": [1500.0, 1700.0], "/v1/realtime (pcm16, 24 kHz)": [1400.0, 1400.0]}
    write_plot(report().to_report(), tmp_path / "telephony.png")
    assert (tmp_path / "telephony.png").stat().st_size > 0


def test_idle_calls_are_a_share_of_one_core_against_a_tenth_of_the_goal_each():
    idle = IdleCalls(calls=4, window_s=8.0, agent_cpu_s=0.4, stand_ins_cpu_s=0.1)
    assert idle.percent == pytest.approx(5.0)
    assert idle.goal_percent == pytest.approx(10.0)


def test_a_sample_was_said_when_its_frame_left_less_the_audio_after_it():
    twilio = StandIn(CARRIERS["twilio"], socket=None)  # no socket: only the clock's records
    for index in range(5):
        twilio.departures.append((index, 10.0 + 0.02 * index))
        twilio.sent_frames += 1

    assert twilio.moment(1, 0) == pytest.approx(10.0)  # frame 1 left at 10.02 with 20 ms after its first sample
    assert twilio.moment(1, 159) == pytest.approx(10.02 - 1 / 8000)  # its last sample
    assert twilio.moment(1, 160) == pytest.approx(10.02)  # frame 2's first
    assert twilio.moment(4, 160) is None  # frame 5 has not left


async def test_the_echo_llm_says_the_question_back_and_more():
    messages = [{"role": "user", "content": [{"text": "Why is the sky blue?"}]}]
    text = "".join([e["contentBlockDelta"]["delta"]["text"] async for e in EchoModel().stream(messages)])

    assert text.startswith("You asked: Why is the sky blue. This is sentence number 1")
