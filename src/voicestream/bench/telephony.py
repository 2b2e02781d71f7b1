"""``voicestream bench telephony``: a phone call as its caller hears it, over a stand-in Twilio.

A real speech server and the agent run on 127.0.0.1 (the local LLM made as ``bench voice``
makes it, or ``--llm echo``, which answers at once and measures the audio path alone), with
Twilio's routes on and signed as Twilio signs them. Twilio cannot be reached from here, so
its stand-in (`voicestream.bench.carrier`, Media Streams' documented JSON exactly) fetches the
webhook's TwiML, opens the stream it names, sends the caller's mu-law at 8 kHz in 20 ms frames
paced by the wall clock, plays the agent's audio at real-time pace and says each mark back
once the audio before it has played. The spoken questions are those of ``bench voice``, made
by the engine in the caller's voice and trimmed to their speech, so where the speech starts
and ends is known to the sample; both faces use ``semantic_vad`` (a call's own turn
detection).

1. **Voice to voice**, per question: the question's last word → the first ``media`` back on
   the call (mu-law both ways); in the same run the same questions over ``/v1/realtime`` in
   pcm16 at 24 kHz, measured as ``bench voice`` does (→ the first
   ``response.output_audio.delta``); the medians and their ratio (goal: 1.15 at most).
2. **Barge-in**: while an answer plays on the call, the caller speaks over it; from the
   speech's start to the ``clear`` received (goal: 300 ms at most); and the truncation error:
   what the conversation kept of the cut answer against what the carrier had played when it
   cleared (goal: within 100 ms).
3. **What the agent heard**: the questions' WER as the agent's own recognizer heard them, over
   the call (the call's transcript, `TelephonyCall.transcript`) and over ``/v1/realtime``
   (``conversation.item.input_audio_transcription.completed``); the ratio (goal: 1.5 at most).
4. **Idle calls**: N calls whose callers only send silence, their greetings played; the
   agent's CPU over a window, as a share of one core (goal: 25 % for ten calls). The agent
   runs in this process: its CPU is the process's less this thread's, where the stand-ins run.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from voicestream.bench.carrier import FRAME_S, Said, StandIn, call, webhook_stream_url
from voicestream.bench.report import Advance, Chart, Report, Table, machine_context, progress
from voicestream.bench.voice import (
    BARGE_IN_GOAL_MS,
    INTERRUPTIONS,
    QUESTION_VOICE,
    QUESTIONS,
    SETTLE_S,
    TURN_TIMEOUT_S,
    WARM_UP_QUESTION,
    FirstTokens,
    RealtimeCaller,
    Utterance,
    spoken,
    turn_detection,
)
from voicestream.bench.wer import pooled_word_error_rate, word_error_rate
from voicestream.engine import KokoroEngine
from voicestream.logs import quiet_agentcore_logs
from voicestream.server import running_server

LLMS = ("local", "echo")
TOKEN = "bench-telephony-twilio-auth-token"
"""The stand-in Twilio account's auth token: the agent checks every webhook and stream by it."""
GREETING = "Hello, how can I help?"
BARGE_IN_QUESTION = "Tell me a story about a brave little dragon."
INTERRUPTION = INTERRUPTIONS[0]
INTERRUPT_AFTER_S = 1.0
"""How much of the answer the caller hears before speaking over it."""
CALL_RATE = 8000
RATIO_GOAL = 1.15
"""The call's voice to voice against /v1/realtime's, at most."""
TRUNCATION_GOAL_MS = 100.0
WER_RATIO_GOAL = 1.5
IDLE_GOAL_PERCENT = 25.0
IDLE_GOAL_CALLS = 10
"""Ten calls that only listen cost at most a quarter of one core in all."""
ECHO_SENTENCES = 4
ANSWER_TIMEOUT_S = 120.0
"""The most a question waits for its answer's first audio before the bench gives up."""


class EchoModel:
    """``--llm echo``: an LLM that answers at once (the question said back, then a few
    sentences, enough to speak over), so that the bench measures the call's audio path and
    not the local model's time. It takes what `stream_text` gives a model."""

    async def stream(
        self, messages: list[dict[str, Any]], system_prompt: str | None = None, **_: Any
    ) -> AsyncIterator[Any]:
        question = "".join(b.get("text", "") for b in messages[-1]["content"]) if messages else ""
        answer = f"You asked: {question.strip().rstrip('.?!')}." + "".join(
            f" This is sentence number {n} of the answer." for n in range(1, ECHO_SENTENCES + 1)
        )
        for word in answer.split(" "):
            yield {"contentBlockDelta": {"delta": {"text": f"{word} "}}}


@dataclass(frozen=True, slots=True)
class Question:
    """One question, answered over the call and over /v1/realtime: voice to voice (ms after
    its last word) and what the agent heard of it, on each."""

    text: str
    call_ms: float | None
    realtime_ms: float | None
    call_heard: str
    realtime_heard: str

    @property
    def call_wer(self) -> float:
        return word_error_rate(self.text, self.call_heard)

    @property
    def realtime_wer(self) -> float:
        return word_error_rate(self.text, self.realtime_heard)


@dataclass(frozen=True, slots=True)
class CallBargeIn:
    """An answer on the call spoken over by the caller."""

    question: str
    interruption: str
    clear_ms: float | None
    """The interrupting speech starts → the `clear` received (None: none came)."""
    played_ms: float | None
    """Of the answer, played by the carrier when it cleared."""
    kept_ms: float | None
    """Of the answer, kept by the conversation (its truncation; None: not truncated)."""

    @property
    def truncation_error_ms(self) -> float | None:
        if self.played_ms is None or self.kept_ms is None:
            return None
        return self.kept_ms - self.played_ms


@dataclass(frozen=True, slots=True)
class IdleCalls:
    calls: int
    window_s: float
    agent_cpu_s: float
    stand_ins_cpu_s: float
    """This thread's: the stand-ins' JSON and base64 (not the agent's)."""

    @property
    def percent(self) -> float:
        """The agent's CPU as a share of one core."""
        return 100 * self.agent_cpu_s / self.window_s

    @property
    def goal_percent(self) -> float:
        """The goal for this many calls (a tenth of 25 % each)."""
        return IDLE_GOAL_PERCENT * self.calls / IDLE_GOAL_CALLS


def ratio(measured: float | None, reference: float | None) -> float | None:
    """`measured` / `reference`; None where either is missing or the reference is 0 (then
    `within` still judges)."""
    if measured is None or reference is None or reference == 0:
        return None
    return measured / reference


def within(measured: float | None, reference: float | None, factor: float) -> bool | None:
    """Whether `measured` is at most `factor` × `reference` (0 against 0 is within)."""
    if measured is None or reference is None:
        return None
    return measured <= factor * reference


def median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _round(value: float | None, digits: int = 0) -> float | int | None:
    if value is None:
        return None
    return round(value) if digits == 0 else round(value, digits)


@dataclass
class TelephonyReport:
    questions: list[Question]
    barge_ins: list[CallBargeIn]
    idle: IdleCalls | None
    context: dict[str, object]
    notes: list[str]

    @property
    def call_wer(self) -> float:
        return pooled_word_error_rate((q.text, q.call_heard) for q in self.questions)

    @property
    def realtime_wer(self) -> float:
        return pooled_word_error_rate((q.text, q.realtime_heard) for q in self.questions)

    def goals(self) -> Table:
        """Each goal: what was measured, the goal, whether it is met."""
        table = Table("Phone-call goals, measured", ["goal", "measured", "goal value", "met"])
        call = median([q.call_ms for q in self.questions])
        realtime = median([q.realtime_ms for q in self.questions])
        table.add("voice to voice, call, median ms", _round(call), None, None)
        table.add("voice to voice, /v1/realtime pcm16, median ms", _round(realtime), None, None)
        table.add("call / realtime", _round(ratio(call, realtime), 2), RATIO_GOAL, within(call, realtime, RATIO_GOAL))
        clears = [b.clear_ms for b in self.barge_ins]
        worst_clear = max((c for c in clears if c is not None), default=None)
        met = None if not clears else worst_clear is not None and None not in clears and worst_clear <= BARGE_IN_GOAL_MS
        table.add("barge-in: speech starts → clear, worst ms", _round(worst_clear), BARGE_IN_GOAL_MS, met)
        errors = [b.truncation_error_ms for b in self.barge_ins]
        worst = max((e for e in errors if e is not None), key=abs, default=None)
        met = None if not errors else worst is not None and None not in errors and abs(worst) <= TRUNCATION_GOAL_MS
        table.add("kept − played of the cut answer, worst ms", _round(worst), f"±{TRUNCATION_GOAL_MS:.0f}", met)
        if self.questions:
            call_wer, realtime_wer = self.call_wer, self.realtime_wer
            table.add("questions' WER over the call (8 kHz mu-law), %", _round(100 * call_wer, 1), None, None)
            table.add("questions' WER over /v1/realtime (24 kHz pcm16), %", _round(100 * realtime_wer, 1), None, None)
            table.add("WER call / realtime", _round(ratio(call_wer, realtime_wer), 2), WER_RATIO_GOAL,
                      within(call_wer, realtime_wer, WER_RATIO_GOAL))
        if self.idle is not None:
            idle = self.idle
            table.add(f"{idle.calls} calls of silence: agent CPU, % of one core", _round(idle.percent, 1),
                      idle.goal_percent, idle.percent <= idle.goal_percent)
        return table

    def to_report(self) -> Report:
        report = Report("telephony", context=self.context)
        report.tables.append(self.goals())
        report.tables.append(
            Table(
                "Each question: voice to voice (ms after its last word) and what the agent heard",
                ["question", "call ms", "/v1/realtime ms", "heard over the call", "WER %",
                 "heard over /v1/realtime", "WER %"],
                [
                    [q.text, _round(q.call_ms), _round(q.realtime_ms), q.call_heard,
                     _round(100 * q.call_wer, 1), q.realtime_heard, _round(100 * q.realtime_wer, 1)]
                    for q in self.questions
                ],
            )
        )
        if self.barge_ins:
            report.tables.append(
                Table(
                    "Barge-in on the call: the caller speaks over the answer",
                    ["answer to", "interruption", "speech → clear ms", "played ms", "kept ms", "kept − played ms"],
                    [
                        [b.question, b.interruption, _round(b.clear_ms), _round(b.played_ms), _round(b.kept_ms),
                         _round(b.truncation_error_ms)]
                        for b in self.barge_ins
                    ],
                )
            )
        if self.idle is not None:
            idle = self.idle
            report.tables.append(
                Table(
                    "Calls that only send silence (greetings played), CPU over the window",
                    ["calls", "window s", "agent CPU s", "agent % of one core", "stand-ins' CPU s"],
                    [[idle.calls, _round(idle.window_s, 1), _round(idle.agent_cpu_s, 2), _round(idle.percent, 1),
                      _round(idle.stand_ins_cpu_s, 2)]],
                )
            )
        report.charts.append(
            Chart(
                "Voice to voice, ms after the question's last word",
                [q.text[:24] for q in self.questions],
                {"call (mu-law, 8 kHz)": [q.call_ms for q in self.questions],
                 "/v1/realtime (pcm16, 24 kHz)": [q.realtime_ms for q in self.questions]},
                ylabel="ms",
            )
        )
        report.notes.extend(self.notes)
        return report


def measure_telephony(
    engine: KokoroEngine,
    questions: Sequence[str] = QUESTIONS,
    calls: int = IDLE_GOAL_CALLS,
    llm: str = "local",
    max_tokens: int = 60,
    window_s: float = 10.0,
    barge_in: bool = True,
    asr_model: str | None = None,
) -> TelephonyReport:
    """Measure `questions` over a Twilio call and over /v1/realtime, one barge-in on the call
    (`barge_in`), and `calls` calls of silence over `window_s` (0: none); the agent hears with
    `asr_model` (as `voicestream agent --asr-model`; None: its default)."""
    from voicestream.agent.app import AgentSettings, create_app, running_agent
    from voicestream.agent.runtime import AnswerLimits
    from voicestream.agent.settings import TelephonySettings
    from voicestream.agent.speech_input import default_asr_model

    if llm not in LLMS:
        raise ValueError(f"unknown LLM {llm!r}: choose {', '.join(LLMS)}")
    quiet_agentcore_logs()
    texts = [WARM_UP_QUESTION, *questions, *([BARGE_IN_QUESTION, INTERRUPTION] if barge_in else [])]
    renders = list(dict.fromkeys(texts))
    context = {
        **machine_context(),
        "llm": llm,
        "max_tokens": max_tokens,
        "turn_detection": "semantic_vad",
        "asr_model": asr_model or default_asr_model(),
        "carrier": "stand-in Twilio (Media Streams, mu-law 8 kHz both ways)",
        "question_voice": QUESTION_VOICE,
        "idle_calls": calls,
        "idle_window_s": window_s,
    }
    limits = AnswerLimits(max_answers=max(AnswerLimits().max_answers, calls + 2))
    steps = len(renders) + 1 + 2 * len(questions) + barge_in + (calls > 0)
    with progress("bench telephony", steps) as advance:
        utterances = {text: spoken(engine, text) for text in renders}
        advance(len(renders))
        with running_server(engine) as speech_url:
            settings = AgentSettings(
                speech_url=speech_url, max_tokens=max_tokens, limits=limits, asr_model=asr_model,
                telephony=TelephonySettings(twilio_auth_token=TOKEN, greeting=GREETING),
            )
            model = FirstTokens(settings.create_model() if llm == "local" else EchoModel())
            app = create_app(settings, llm=model)
            with running_agent(app) as agent_url:
                caller = RealtimeCaller(
                    agent_url.replace("http://", "ws://"), model, utterances,
                    turn_detection("semantic_vad", 500), advance,
                )
                realtime, _, late_s = asyncio.run(caller.run(questions, (), (), 0.0, warm_up=True))
                phone = _Phone(agent_url, app.state.service, utterances, advance)
                on_call, barge_ins = asyncio.run(phone.measure(questions, barge_in))
                idle = asyncio.run(phone.idle(calls, window_s)) if calls else None
    measured = [
        Question(text, call_ms, turn.first_audio_ms, heard, turn.heard)
        for text, (call_ms, heard), turn in zip(questions, on_call, realtime, strict=True)
    ]
    notes = [
        "a shared machine (its load average is in the context): figures compare only within this run",
        f"/v1/realtime's microphone: its slowest 20 ms chunk left {1000 * late_s:,.0f} ms late",
        f"the stand-in Twilio's slowest 20 ms frame left {1000 * phone.late_s:,.0f} ms late",
    ]
    return TelephonyReport(measured, barge_ins, idle, context, notes)


class _Phone:
    """Calls over the stand-in Twilio: the questions, a barge-in, calls of silence."""

    def __init__(
        self, agent_url: str, service: Any, utterances: dict[str, Utterance], advance: Advance
    ) -> None:
        self.base = agent_url
        self.service = service
        self.utterances = utterances
        self.advance = advance
        self.late_s = 0.0

    async def measure(
        self, questions: Sequence[str], barge_in: bool
    ) -> tuple[list[tuple[float | None, str]], list[CallBargeIn]]:
        """Each question on one call (voice to voice, what was heard), then the barge-in."""
        stream_url, headers = await self._dial()
        async with call(stream_url, "twilio", headers) as twilio:
            agent = (await self._answered(twilio, 1))[0]
            turns = []
            for question in questions:
                turns.append(await self._turn(twilio, agent, question))
                self.advance()
            barge_ins = [await self._barge_in(twilio, agent)] if barge_in else []
            self.advance(int(barge_in))
            self.late_s = max(self.late_s, twilio.late_s)
        return turns, barge_ins

    async def idle(self, calls: int, window_s: float) -> IdleCalls:
        """`calls` calls that only send silence, once their greetings have played: the CPU of
        this process over `window_s`, less this thread's (the stand-ins')."""
        stream_url, headers = await self._dial()
        await _until(lambda: not self._calls() or None, TURN_TIMEOUT_S, "the last call to hang up")
        async with contextlib.AsyncExitStack() as stack:
            stand_ins = [await stack.enter_async_context(call(stream_url, "twilio", headers)) for _ in range(calls)]
            await self._answered(stand_ins[0], calls)
            await _until(lambda: all(self._quiet(s, a) for s in stand_ins for a in self._calls()) or None,
                         TURN_TIMEOUT_S, "the greetings")
            await asyncio.sleep(SETTLE_S)
            wall, cpu, own = time.perf_counter(), time.process_time(), time.thread_time()
            await asyncio.sleep(window_s)
            wall, cpu, own = time.perf_counter() - wall, time.process_time() - cpu, time.thread_time() - own
            self.late_s = max([self.late_s, *(s.late_s for s in stand_ins)])
        self.advance()
        return IdleCalls(calls, wall, cpu - own, own)

    async def _dial(self) -> tuple[str, dict[str, str]]:
        """Twilio's webhook, signed as Twilio signs it: the stream's URL, and the handshake's
        signature for it."""
        from voicestream.agent.telephony.signatures import twilio_signature

        form = {"CallSid": "CA1", "From": "+15550001111", "To": "+15550002222"}
        signature = twilio_signature(TOKEN, f"{self.base}/telephony/twilio", sorted(form.items()))
        stream_url = await webhook_stream_url(self.base, "twilio", {"X-Twilio-Signature": signature}, urlencode(form))
        return stream_url, {"X-Twilio-Signature": twilio_signature(TOKEN, stream_url)}

    def _calls(self) -> list[Any]:
        from voicestream.agent.telephony.call import TelephonyCall

        return [c for c in self.service.connections if isinstance(c, TelephonyCall)]

    async def _answered(self, twilio: StandIn, calls: int) -> list[Any]:
        """The agent's side of the calls, once `calls` are open and the greeting has played."""
        agents = await _until(lambda: (found := self._calls()) and len(found) >= calls and found or None,
                              TURN_TIMEOUT_S, "the call")
        await _until(lambda: self._quiet(twilio, agents[0]) or None, TURN_TIMEOUT_S, "the greeting")
        return agents

    @staticmethod
    def _quiet(twilio: StandIn, agent: Any) -> bool:
        """Nothing under way: no answer, no transcription, nothing left to play or echo."""
        session = agent.session
        return session.response is None and not session.busy and not twilio.playing and not agent.marks_waiting

    async def _said(self, twilio: StandIn, text: str) -> tuple[Said, float]:
        """Say `text`; its speech's start and end as the caller said them (once sent)."""
        said = twilio.say(self.utterances[text].pcm, then_silence_s=2 * FRAME_S)
        end = await _until(lambda: twilio.moment(said.first_frame, said.samples - 1), TURN_TIMEOUT_S, "the question")
        return said, end

    async def _answer_starts(self, twilio: StandIn, after: float) -> float:
        return await _until(lambda: twilio.first("media", after), ANSWER_TIMEOUT_S, "the answer")

    async def _turn(self, twilio: StandIn, agent: Any, question: str) -> tuple[float | None, str]:
        """Ask `question`; voice to voice, and what the agent heard."""
        before = {item_id for item_id, _, _ in agent.transcript()}
        _, end = await self._said(twilio, question)
        first = await self._answer_starts(twilio, end)
        await _until(lambda: self._quiet(twilio, agent) or None, TURN_TIMEOUT_S, "the answer's end")
        await asyncio.sleep(SETTLE_S)
        heard = " ".join(text for item_id, role, text in agent.transcript() if role == "user" and item_id not in before)
        return 1000 * (first - end), heard

    async def _barge_in(self, twilio: StandIn, agent: Any) -> CallBargeIn:
        """`BARGE_IN_QUESTION`, its answer spoken over after `INTERRUPT_AFTER_S` of it."""
        answer_from = twilio.played_bytes  # nothing plays until the answer comes
        _, end = await self._said(twilio, BARGE_IN_QUESTION)
        await self._answer_starts(twilio, end)
        item_id = [item_id for item_id, role, _ in agent.transcript() if role == "assistant"][-1]
        await _until(lambda: twilio.played_bytes - answer_from >= INTERRUPT_AFTER_S * CALL_RATE or None,
                     TURN_TIMEOUT_S, "the answer to play")
        clears = len(twilio.clears)
        cut, _ = await self._said(twilio, INTERRUPTION)
        start = twilio.moment(cut.first_frame, 0)
        assert start is not None  # sent before its last sample
        with contextlib.suppress(TimeoutError):
            await _until(lambda: len(twilio.clears) > clears or None, 30.0, "the clear")
        clear_ms = played_ms = kept_ms = None
        if len(twilio.clears) > clears:
            cleared_at, played = twilio.clears[clears]
            clear_ms, played_ms = 1000 * (cleared_at - start), 1000 * (played - answer_from) / CALL_RATE
        await _until(lambda: self._quiet(twilio, agent) or None, TURN_TIMEOUT_S, "the interruption's answer")
        entry = agent.session.conversation.find(item_id)
        if entry is not None and entry.turn is not None and entry.turn.heard_s is not None:
            kept_ms = 1000 * entry.turn.heard_s
        return CallBargeIn(BARGE_IN_QUESTION, INTERRUPTION, clear_ms, played_ms, kept_ms)


async def _until[T](find: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """The first non-None `find()`, looked at every 10 ms (the moments measured are stamped as
    frames come and go, not when this looks)."""
    try:
        async with asyncio.timeout(timeout_s):
            while (found := find()) is None:
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise TimeoutError(f"{what}: nothing after {timeout_s:.0f} s") from None
    return found
