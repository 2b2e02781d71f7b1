"""``voicestream bench voice``: the agent as a caller's voice hears it, over the Realtime API.

A real speech server and the agent with the local LLM (SmolLM2 via llama.cpp, made as
``voicestream agent`` makes it: unseeded, so a conversation's prompt prefix stays cached) run
on 127.0.0.1. Spoken questions, made by the engine in a voice other than the answers',
stream into ``WS /v1/realtime`` as a microphone sends them: 20 ms of pcm16 at 24 kHz at a
time, paced by the wall clock, silence between them; the server's turn detection ends each
turn and answers it (``create_response`` and ``interrupt_response``), once with
``semantic_vad`` and once with ``server_vad``, each in a session of its own that holds its
whole conversation. Every event is stamped as it is received; the numbers come from those
stamps and from the moments the input's speech ends or starts, which are known exactly (the
questions are trimmed to their speech).

1. **Voice to voice**, per question: the question's speech ends → the first
   ``response.output_audio.delta`` received, and its marks on the way: the server's VAD ends
   the turn (``input_audio_buffer.speech_stopped``), Whisper has heard it
   (``conversation.item.input_audio_transcription.completed``), the response begins
   (``response.created``), the LLM's first token. The server sends no event for that token:
   it is timed in this process around the agent's model (:class:`FirstTokens`).
2. **Hesitations**: questions with a pause of 600 to 900 ms after a word that leaves them
   unfinished (one render cut between two words, silence in the cut). A **cut-in** is a turn
   the server ended before the speaker went on: an ``input_audio_buffer.speech_stopped``
   whose ``audio_end_ms`` lies before the input's speech resumed (the server's own clock of
   the input audio, exact). Voice to voice is counted from the question's last word.
3. **Barge-in**: while an answer plays, the next question is spoken over it; from the start of
   that speech to the last audio delta of the interrupted answer received (goal: 300 ms at
   most), and whether its ``response.done`` says ``cancelled``.
4. **WER** of each answer: Whisper tiny.en on the answer's audio against its transcript
   (``response.output_audio_transcript.done``), both normalized as in ``bench e2e``.
5. **The end-of-turn models' CPU** (Smart Turn and the words' model, which only the
   ``semantic_vad`` session runs): their runs, the CPU of each, and their share of one core over
   the time the questions last.
"""

from __future__ import annotations

import asyncio
import base64
import json
import statistics
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from voicestream.audio import float_to_pcm16
from voicestream.bench.e2e import ANSWER_TIMEOUT_S, Transcriber
from voicestream.bench.report import Advance, Chart, Report, Table, machine_context, progress
from voicestream.bench.stats import percentile
from voicestream.bench.wer import word_error_rate
from voicestream.engine import KokoroEngine, offline
from voicestream.logs import quiet_agentcore_logs
from voicestream.protocol.messages import DEFAULT_SAMPLE_RATE, DEFAULT_VOICE
from voicestream.server import running_server

QUESTIONS = (
    "What is the capital of France?",
    "Why is the sky blue?",
    "How do plants make their food?",
    "What is a black hole?",
    "Who wrote Romeo and Juliet?",
)
INTERRUPTIONS = (
    "Tell me about the moon instead.",
    "What do bees eat?",
    "How far away is the sun?",
    "Why do cats purr?",
)
"""Spoken over an answer; each is a question the agent then answers (and the next one interrupts)."""
DETECTIONS = ("semantic_vad", "server_vad")


@dataclass(frozen=True, slots=True)
class Hesitation:
    """A question spoken with a pause of `pause_ms` after its `after`-th word."""

    text: str
    after: int
    pause_ms: int


HESITATIONS = (
    Hesitation("How many legs does a spider have?", 4, 700),
    Hesitation("What is the capital of Australia?", 5, 600),
    Hesitation("Can you tell me why the sky is blue?", 5, 800),
    Hesitation("Who painted the Mona Lisa?", 2, 900),
    Hesitation("How far away is the moon from the earth?", 4, 750),
)
"""Each pause follows a word after which the question cannot end ("does", "of", "why",
"painted", "is")."""
WARM_UP_QUESTION = "Hello, who are you?"
QUESTION_VOICE = "am_michael"
"""The caller's voice: not the answers' (`DEFAULT_VOICE`), as on a real call."""
ANSWER_VOICE = DEFAULT_VOICE
RATE = DEFAULT_SAMPLE_RATE
CHUNK_MS = 20
CHUNK_SAMPLES = RATE * CHUNK_MS // 1000
CHUNK_BYTES = CHUNK_SAMPLES * 2
SETTLE_S = 1.0
"""Silence after an answer before the next question is spoken."""
TURN_TIMEOUT_S = 600.0
"""The most one stage of a turn may take on a loaded machine before the bench gives up."""
VOICE_TO_VOICE_GOAL_MS = 1200.0
BARGE_IN_GOAL_MS = 300.0
SPEECH_FLOOR = 0.01
"""A sample is speech once it reaches this share of the utterance's peak: the trim threshold."""


@dataclass(frozen=True, slots=True)
class Utterance:
    """One spoken question: pcm16 at 24 kHz that starts and ends with its speech."""

    text: str
    pcm: bytes
    resumes: int | None = None
    """Hesitant: the sample (from the utterance's start) where the speech goes on after the
    pause."""
    pause_ms: int | None = None


def spoken(engine: KokoroEngine, text: str, voice: str = QUESTION_VOICE) -> Utterance:
    """`text` as the engine speaks it, trimmed to its speech, so that where the speech starts
    and ends in the input is known to the sample."""
    return _trimmed(text, offline.synthesize(engine, text, voice))


def hesitant(engine: KokoroEngine, hesitation: Hesitation, voice: str = QUESTION_VOICE) -> Utterance:
    """The question rendered whole and cut between its `after`-th word and the next, the
    pause's silence in the cut: a voice that goes on, not one that ends a sentence twice."""
    pieces = list(offline.stream(engine, hesitation.text, voice, words=True))
    samples = np.concatenate([piece.audio for piece in pieces])
    words = [word for piece in pieces for word in piece.words]
    before, after = words[hesitation.after - 1], words[hesitation.after]
    cut = round((before.end_s + after.start_s) / 2 * RATE)
    pause = RATE * hesitation.pause_ms // 1000
    joined = np.concatenate([samples[:cut], np.zeros(pause, np.float32), samples[cut:]])
    utterance = _trimmed(hesitation.text, joined)
    lead = int(np.flatnonzero(np.abs(joined) >= SPEECH_FLOOR * float(np.abs(joined).max()))[0])
    resumes = max(cut, round(after.start_s * RATE)) + pause - lead
    return replace(utterance, resumes=resumes, pause_ms=hesitation.pause_ms)


def _trimmed(text: str, samples: np.ndarray) -> Utterance:
    loud = np.flatnonzero(np.abs(samples) >= SPEECH_FLOOR * float(np.abs(samples).max()))
    return Utterance(text, float_to_pcm16(samples[loud[0] : loud[-1] + 1]).tobytes())


class FirstTokens:
    """The agent's model, timed: when each of its streams began and when its first text came.

    The Realtime API has no event for the LLM's first token, and the agent runs in this
    process, so the bench wraps its model; everything else goes to the model unchanged."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.streams: list[list[float]] = []
        """[began] or [began, first token] of each stream, in the order they began."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        timed = [time.perf_counter()]
        self.streams.append(timed)
        events = self.model.stream(*args, **kwargs)
        try:
            async for event in events:
                if len(timed) == 1 and event.get("contentBlockDelta", {}).get("delta", {}).get(
                    "text"
                ):
                    timed.append(time.perf_counter())
                yield event
        finally:
            await events.aclose()  # closing the stream stops the generation (see stream_text)

    def first_token(self, after: float) -> float | None:
        """The first token of the first stream that began at or after `after`."""
        timed = next((timed for timed in self.streams if timed[0] >= after), None)
        return timed[1] if timed and len(timed) > 1 else None


@dataclass
class Received:
    """Every server event with the `time.perf_counter()` it arrived at, by type (an answer
    brings thousands of audio deltas; a wait looks only at the type it waits for)."""

    events: dict[str, list[tuple[float, dict[str, Any]]]] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    failure: str | None = None
    """Why no more events will come (an `error` event, the socket closed): waits stop at once."""

    def add(self, event: dict[str, Any]) -> None:
        self.events.setdefault(event["type"], []).append((time.perf_counter(), event))
        self.changed.set()

    def fail(self, reason: str) -> None:
        self.failure = self.failure or reason
        self.changed.set()

    def find(self, kind: str, since: float, **fields: Any) -> tuple[float, dict[str, Any]] | None:
        """The first event of type `kind` received at or after `since` with these fields."""
        return next(((t, e) for t, e in self.all(kind, **fields) if t >= since), None)

    def all(self, kind: str, **fields: Any) -> list[tuple[float, dict[str, Any]]]:
        return [
            (t, e)
            for t, e in self.events.get(kind, [])
            if all(e.get(k) == v for k, v in fields.items())
        ]

    async def wait(self, find: Callable[[], Any], timeout_s: float) -> Any:
        """The first non-None `find()`, re-checked as events arrive; TimeoutError after `timeout_s`."""
        async with asyncio.timeout(timeout_s):
            while (found := find()) is None:
                if self.failure:
                    raise RuntimeError(self.failure)
                self.changed.clear()
                await self.changed.wait()
        return found


class Microphone:
    """Sends 20 ms of audio every 20 ms of wall clock: the utterances given, else silence.

    A chunk leaves when its audio has been "recorded": the sample at input time `a` is spoken
    at `t0 + a`. A loaded client sends late; then a sample counts as spoken when its chunk
    actually left (less the audio after it in the chunk), so the client's delay is not
    charged to the server. An utterance starts at the next chunk boundary."""

    def __init__(self, socket: Any) -> None:
        self.socket = socket
        self.t0 = 0.0
        self.sent_at: list[float] = []
        """When each chunk left."""
        self.pending = bytearray()
        self.late_s = 0.0
        """How far behind the wall clock the slowest chunk left (a loaded client)."""

    def say(self, utterance: Utterance) -> tuple[int, int]:
        """Queue `utterance`; the input samples where its speech starts and ends."""
        start = (len(self.sent_at) * CHUNK_BYTES + len(self.pending)) // 2
        padding = -len(utterance.pcm) % CHUNK_BYTES
        self.pending += utterance.pcm + bytes(padding)
        return start, start + len(utterance.pcm) // 2

    def moment(self, sample: int) -> float:
        """When input `sample` was spoken: its chunk's departure, or when it is due to leave."""
        chunk = sample // CHUNK_SAMPLES
        if chunk >= len(self.sent_at):
            return self.t0 + sample / RATE
        return self.sent_at[chunk] - ((chunk + 1) * CHUNK_SAMPLES - sample) / RATE

    async def run(self) -> None:
        self.t0 = time.perf_counter()
        while True:
            due = self.t0 + (len(self.sent_at) + 1) * CHUNK_MS / 1000
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            self.late_s = max(self.late_s, time.perf_counter() - due)
            chunk = bytes(self.pending[:CHUNK_BYTES]) or bytes(CHUNK_BYTES)
            del self.pending[:CHUNK_BYTES]
            audio = base64.b64encode(chunk).decode("ascii")
            await self.socket.send(
                json.dumps({"type": "input_audio_buffer.append", "audio": audio})
            )
            self.sent_at.append(time.perf_counter())


@dataclass(frozen=True, slots=True)
class VoiceTurn:
    """One question answered: its marks in ms after the question's speech ended; for a
    hesitant question, the turns the server ended while it was spoken."""

    detection: str
    question: str
    heard: str
    end_of_turn_ms: float | None
    transcribed_ms: float | None
    response_ms: float | None
    llm_first_token_ms: float | None
    first_audio_ms: float | None
    status: str | None
    answer: str
    audio: bytes = field(repr=False)
    wer: float | None = None
    pause_ms: int | None = None
    """Hesitant: the pause inside the question."""
    cut_ins: int = 0
    """Turns the server ended before the speech resumed after the pause."""

    @property
    def answer_s(self) -> float:
        return len(self.audio) / 2 / RATE

    def marks(self) -> list[float | None]:
        """The stages in the order they happen (the table's columns)."""
        return [
            self.end_of_turn_ms,
            self.transcribed_ms,
            self.response_ms,
            self.llm_first_token_ms,
            self.first_audio_ms,
        ]


STAGES = (
    "end of turn (VAD)",
    "transcribed",
    "response.created",
    "LLM first token",
    "first audio (voice to voice)",
)


@dataclass(frozen=True, slots=True)
class BargeIn:
    """An answer spoken over: what was received of it after the interrupting speech began."""

    detection: str
    question: str
    interruption: str
    speech_started_ms: float
    """The interrupting speech starts → `input_audio_buffer.speech_started` received."""
    done_ms: float
    """The interrupting speech starts → the interrupted answer's `response.done` received."""
    last_audio_ms: float
    """The interrupting speech starts → the interrupted answer's last audio delta received
    (negative: all of it had come before)."""
    status: str | None
    audio_after_done: int
    """Audio deltas of the interrupted answer received after its `response.done` (should be 0)."""

    @property
    def within_goal(self) -> bool:
        return self.status == "cancelled" and self.last_audio_ms <= BARGE_IN_GOAL_MS


@dataclass(frozen=True, slots=True)
class VoiceReport:
    turns: list[VoiceTurn]
    """Whole questions and hesitant ones (`pause_ms` set), of every turn detection."""
    barge_ins: list[BargeIn]
    context: dict[str, object]
    notes: list[str]

    @property
    def whole(self) -> list[VoiceTurn]:
        return [t for t in self.turns if t.pause_ms is None]

    @property
    def hesitant(self) -> list[VoiceTurn]:
        return [t for t in self.turns if t.pause_ms is not None]

    def to_report(self) -> Report:
        report = Report("voice", context=self.context)
        report.tables.append(
            Table(
                "Voice to voice over /v1/realtime (one session per turn detection), ms after the question's speech ends",
                ["turn detection", "question", *STAGES, "answer s", "WER %"],
                [
                    [t.detection, t.question, *_ms(t.marks()), round(t.answer_s, 2), _percent(t.wer)]
                    for t in self.whole
                ],
            )
        )
        report.tables.append(self._summary())
        report.tables.append(
            Table(
                "Hesitations: a pause inside the question; cut-ins are turns ended before the speech went on",
                ["turn detection", "question", "pause ms", "cut-ins", "heard", "voice to voice ms"],
                [
                    [t.detection, t.question, t.pause_ms, t.cut_ins, t.heard, _ms([t.first_audio_ms])[0]]
                    for t in self.hesitant
                ],
            )
        )
        report.tables.append(
            Table(
                "Barge-in: the next question spoken over an answer, ms after the interrupting speech starts",
                [
                    "turn detection",
                    "interrupted answer to",
                    "interruption",
                    "speech_started",
                    "response.done",
                    "last answer audio",
                    "status",
                    "audio after response.done",
                    f"≤ {BARGE_IN_GOAL_MS:.0f} ms",
                ],
                [
                    [
                        b.detection,
                        b.question,
                        b.interruption,
                        *_ms([b.speech_started_ms, b.done_ms, b.last_audio_ms]),
                        b.status,
                        b.audio_after_done,
                        b.within_goal,
                    ]
                    for b in self.barge_ins
                ],
            )
        )
        report.charts.append(
            Chart(
                "Marks after the question's speech ends",
                [f"{t.detection[:8]}: {t.question[:20]}" for t in self.whole],
                {stage: [t.marks()[i] for t in self.whole] for i, stage in enumerate(STAGES)},
                ylabel="ms",
            )
        )
        report.notes.extend(self.notes)
        return report

    def _summary(self) -> Table:
        table = Table(
            "Voice to voice, p50 and p95 (ms after the speech ends), and each stage's own share",
            ["turn detection", "stage", "p50 ms", "p95 ms", "stage p50 ms", "turns"],
        )
        for detection in dict.fromkeys(t.detection for t in self.whole):
            turns = [t for t in self.whole if t.detection == detection]
            previous: list[float | None] = [0.0] * len(turns)
            for index, stage in enumerate(STAGES):
                marks = [t.marks()[index] for t in turns]
                present = [m for m in marks if m is not None]
                steps = [
                    m - p
                    for m, p in zip(marks, previous, strict=True)
                    if m is not None and p is not None
                ]
                table.add(
                    detection,
                    stage,
                    *_ms(_p50_p95(present)),
                    _ms([statistics.median(steps) if steps else None])[0],
                    len(present),
                )
                previous = marks
        return table


def _p50_p95(values: Sequence[float]) -> list[float | None]:
    return [statistics.median(values), percentile(values, 0.95)] if values else [None, None]


def _ms(values: Sequence[float | None]) -> list[float | None]:
    return [None if v is None else round(v) for v in values]


def _percent(value: float | None) -> float | None:
    return None if value is None else round(100 * value, 1)


def measure_voice(
    engine: KokoroEngine,
    questions: Sequence[str] = QUESTIONS,
    interruptions: Sequence[str] = INTERRUPTIONS[:3],
    transcribe: Transcriber | None = None,
    max_tokens: int = 60,
    silence_ms: int = 500,
    interrupt_after_s: float = 0.5,
    warm_up: bool = True,
    detections: Sequence[str] = DETECTIONS,
    hesitations: Sequence[Hesitation] = HESITATIONS,
) -> VoiceReport:
    """Run the measurements in one Realtime session per turn detection (`detections`:
    ``semantic_vad``, ``server_vad``); `transcribe` scores the answers (None: no WER).

    `silence_ms` is the server VAD's `silence_duration_ms` (the least the end of a turn can
    take with it); `interrupt_after_s` how long an answer plays before the next question is
    spoken over it."""
    from voicestream.agent.app import AgentSettings, create_app, running_agent
    from voicestream.agent.runtime import AnswerLimits

    quiet_agentcore_logs()
    context = {
        **machine_context(),
        "max_tokens": max_tokens,
        "turn_detections": list(detections),
        "silence_duration_ms": silence_ms,
        "question_voice": QUESTION_VOICE,
        "answer_voice": ANSWER_VOICE,
    }
    texts = [WARM_UP_QUESTION] * warm_up + [
        *questions,
        *([questions[-1]] if interruptions else []),
        *interruptions,
    ]
    limits = AnswerLimits(answer_timeout_s=ANSWER_TIMEOUT_S, speech_timeout_s=ANSWER_TIMEOUT_S)
    renders = len(texts) + len(hesitations)  # and as many turns in each session
    scored = (len(questions) + len(hesitations)) * (transcribe is not None)
    steps = renders + len(detections) * (renders + scored)
    with progress("bench voice", steps) as advance:
        utterances = {text: spoken(engine, text) for text in dict.fromkeys(texts)}
        advance(len(texts))
        for hesitation in hesitations:
            utterances[hesitation.text] = hesitant(engine, hesitation)
            advance()
        turns: list[VoiceTurn] = []
        barge_ins: list[BargeIn] = []
        late_s = 0.0
        with running_server(engine) as speech_url:
            settings = AgentSettings(speech_url=speech_url, max_tokens=max_tokens, limits=limits)
            llm = FirstTokens(settings.create_model())  # as `voicestream agent` makes it: unseeded
            app = create_app(settings, llm=llm)
            with running_agent(app) as agent_url:
                for detection in detections:
                    session = RealtimeCaller(
                        agent_url.replace("http://", "ws://"),
                        llm,
                        utterances,
                        turn_detection(detection, silence_ms),
                        advance,
                    )
                    more_turns, more_barge_ins, late = asyncio.run(
                        session.run(questions, hesitations, interruptions, interrupt_after_s, warm_up)
                    )
                    turns += more_turns
                    barge_ins += more_barge_ins
                    late_s = max(late_s, late)
        if transcribe is not None:
            turns = [_scored(turn, transcribe, advance) for turn in turns]
    said = [*texts, *(h.text for h in hesitations)]
    session_s = sum(len(utterances[text].pcm) for text in said) / 2 / RATE
    notes = _notes(turns, barge_ins, late_s) + _end_of_turn_cost(session_s)
    return VoiceReport(turns, barge_ins, context, notes)


def _end_of_turn_cost(spoken_s: float) -> list[str]:
    """What the end-of-turn models (Smart Turn on the audio, the words' model) cost in this
    process (the agent runs here: only the semantic_vad session runs them), against the
    `spoken_s` of questions that session heard."""
    from voicestream.agent.realtime.end_of_turn import SmartTurn, TextTurn, TurnModelUnavailable

    models: list[tuple[str, SmartTurn | TextTurn]] = []
    for name, load in (("Smart Turn", SmartTurn.load), ("the words' model", TextTurn.load)):
        try:
            models.append((name, load()))
        except TurnModelUnavailable:
            continue
    lines = []
    for name, model in models:
        if model.runs:
            each_ms = 1000 * model.cpu_s / model.runs
            lines.append(
                f"{name}: {model.runs} runs, {each_ms:,.0f} ms of CPU each; "
                f"{100 * model.cpu_s / spoken_s:.1f} % of one core over the {spoken_s:.0f} s the questions last"
            )
    if len(lines) == 2:
        total = sum(model.cpu_s for _, model in models)
        lines.append(f"end-of-turn models together: {100 * total / spoken_s:.1f} % of one core")
    return lines


def turn_detection(detection: str, silence_ms: int) -> dict[str, Any]:
    answers = {"create_response": True, "interrupt_response": True}
    if detection == "server_vad":
        return {"type": "server_vad", "silence_duration_ms": silence_ms, **answers}
    return {"type": detection, **answers}


def _scored(turn: VoiceTurn, transcribe: Transcriber, advance: Advance) -> VoiceTurn:
    advance()
    if not turn.audio or not turn.answer.strip():
        return turn
    wer = word_error_rate(turn.answer, transcribe(turn.audio, RATE))
    return replace(turn, wer=wer)


def _notes(turns: list[VoiceTurn], barge_ins: list[BargeIn], late_s: float) -> list[str]:
    lines = []
    medians = {}
    for detection in dict.fromkeys(t.detection for t in turns):
        mine = [t for t in turns if t.detection == detection]
        voice = [t.first_audio_ms for t in mine if t.pause_ms is None and t.first_audio_ms is not None]
        if voice:
            medians[detection] = median = statistics.median(voice)
            verdict = "meets" if median <= VOICE_TO_VOICE_GOAL_MS else "misses"
            lines.append(
                f"{detection}: voice to voice median {median:,.0f} ms, p95 {percentile(voice, 0.95):,.0f} ms "
                f"({verdict} the {VOICE_TO_VOICE_GOAL_MS:,.0f} ms goal)"
            )
        hesitant = [t for t in mine if t.pause_ms is not None]
        if hesitant:
            cut = sum(1 for t in hesitant if t.cut_ins)
            unanswered = sum(1 for t in hesitant if t.status is None)
            lines.append(
                f"{detection}: {cut} of {len(hesitant)} hesitant questions cut in on (a turn ended "
                f"before the speaker went on); {unanswered} got no answer to their last part (the "
                "agent was still answering the first)"
            )
    if "semantic_vad" in medians and "server_vad" in medians:
        lines.append(
            f"semantic_vad's median voice to voice is {medians['semantic_vad'] / medians['server_vad']:.2f}x "
            "server_vad's in this run"
        )
    reactions = [b.last_audio_ms for b in barge_ins if b.status == "cancelled"]
    if reactions:
        worst = max(reactions)
        verdict = "meets" if worst <= BARGE_IN_GOAL_MS else "misses"
        when = f"{worst:,.0f} ms after" if worst > 0 else f"{-worst:,.0f} ms before"
        lines.append(
            f"barge-in: the last audio of an interrupted answer came at worst {when} the interrupting "
            f"speech began ({verdict} the {BARGE_IN_GOAL_MS:,.0f} ms goal; before: the answer's next "
            "audio was not rendered yet when the cancel came)"
        )
        cancelled = [b for b in barge_ins if b.status == "cancelled"]
        if not any(b.audio_after_done for b in cancelled):
            bound = max(b.done_ms for b in cancelled)
            lines.append(
                "no audio of a cancelled answer came after its response.done, so none could have come "
                f"later than response.done: at worst {bound:,.0f} ms after the interrupting speech began"
            )
    for b in barge_ins:
        if b.status != "cancelled":
            lines.append(
                f"barge-in over the answer to {b.question!r} ({b.detection}): status {b.status} (not cancelled)"
            )
    wers = [t.wer for t in turns if t.wer is not None]
    if wers:
        lines.append(
            f"answers' WER (Whisper tiny.en against response.output_audio_transcript.done): "
            f"mean {100 * statistics.fmean(wers):.1f} %"
        )
    failed = [f"{t.question} ({t.detection})" for t in turns if t.status != "completed"]
    if failed:
        lines.append(f"not completed: {failed}")
    lines.append(
        "LLM first token: timed in this process around the agent's model (the Realtime API sends no "
        "event for it); the other marks are events as the client received them."
    )
    lines.append(
        f"the microphone's slowest 20 ms chunk left {1000 * late_s:,.0f} ms late (a loaded client)"
    )
    return lines


class RealtimeCaller:
    """One Realtime session: the microphone, the received events, and the turns as scripted."""

    def __init__(
        self,
        url: str,
        llm: FirstTokens,
        utterances: dict[str, Utterance],
        detection: dict[str, Any],
        advance: Advance,
    ) -> None:
        self.url = f"{url}/v1/realtime"
        self.llm = llm
        self.utterances = utterances
        self.detection = detection
        self.advance = advance
        self.received = Received()
        self.socket: Any = None

    async def run(
        self,
        questions: Sequence[str],
        hesitations: Sequence[Hesitation],
        interruptions: Sequence[str],
        interrupt_after_s: float,
        warm_up: bool,
    ) -> tuple[list[VoiceTurn], list[BargeIn], float]:
        from websockets.asyncio.client import connect

        async with connect(self.url, max_size=None) as socket:
            self.socket = socket
            await socket.send(json.dumps({"type": "session.update", "session": self._session()}))
            microphone = Microphone(socket)
            tasks = [asyncio.create_task(self._read(socket)), asyncio.create_task(microphone.run())]
            try:
                updated = await self.received.wait(
                    lambda: self.received.find("session.updated", 0.0), 60
                )
                served = updated[1]["session"]["audio"]["input"]["turn_detection"]["type"]
                if served != self.detection["type"]:
                    raise RuntimeError(f"{self.detection['type']} is served by {served} here")
                if warm_up:
                    await self._turn(microphone, WARM_UP_QUESTION)
                turns = [await self._turn(microphone, question) for question in questions]
                turns += [await self._turn(microphone, h.text) for h in hesitations]
                barge_ins = await self._barge_ins(
                    microphone, questions[-1], interruptions, interrupt_after_s
                )
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        return turns, barge_ins, microphone.late_s

    def _session(self) -> dict[str, Any]:
        return {
            "type": "realtime",
            "output_modalities": ["audio"],
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": RATE},
                    "turn_detection": self.detection,
                },
                "output": {"format": {"type": "audio/pcm", "rate": RATE}, "voice": ANSWER_VOICE},
            },
        }

    async def _read(self, socket: Any) -> None:
        try:
            async for message in socket:
                event = json.loads(message)
                if event["type"] == "error":
                    self.received.fail(f"the agent sent an error: {event['error']}")
                self.received.add(event)
        finally:
            self.received.fail("the agent closed the socket")

    async def _turn(self, microphone: Microphone, question: str) -> VoiceTurn:
        """Speak `question`, wait for its answer to be done, then a little silence."""
        utterance = self.utterances[question]
        start, end = microphone.say(utterance)
        response_id = await self._answer(microphone.moment(end))
        if response_id is not None:
            await self.received.wait(lambda: self._done(response_id), TURN_TIMEOUT_S)
        await asyncio.sleep(SETTLE_S)
        self.advance()
        turn = self._voice_turn(question, microphone.moment(end), response_id)
        if utterance.resumes is None:
            return turn
        # The server's own clock of the input audio: a turn it ended before the speech resumed.
        first_ms, resumed_ms = start * 1000 // RATE, (start + utterance.resumes) * 1000 // RATE
        stops = [
            e for _, e in self.received.all("input_audio_buffer.speech_stopped")
            if first_ms <= e["audio_end_ms"] <= end * 1000 // RATE + SETTLE_S * 1000
        ]
        heard = [
            e["transcript"]
            for stop in stops
            for _, e in self.received.all(
                "conversation.item.input_audio_transcription.completed", item_id=stop["item_id"]
            )
        ]
        cut_ins = sum(1 for e in stops if e["audio_end_ms"] < resumed_ms)
        return replace(turn, heard=" | ".join(heard), pause_ms=utterance.pause_ms, cut_ins=cut_ins)

    async def _answer(self, speech_end: float) -> str | None:
        """The id of the response to the turn that ends after `speech_end`; None where the
        agent heard no words in it, or was still answering an earlier part of the question
        (a cut-in: it answers one turn at a time), once that answer is done."""
        stopped_at, stopped = await self.received.wait(
            lambda: self.received.find("input_audio_buffer.speech_stopped", speech_end),
            TURN_TIMEOUT_S,
        )
        heard_at, heard = await self.received.wait(
            lambda: self.received.find(
                "conversation.item.input_audio_transcription.completed",
                stopped_at,
                item_id=stopped["item_id"],
            ),
            TURN_TIMEOUT_S,
        )
        answering = [
            e["response"]["id"]
            for t, e in self.received.all("response.created")
            if t < heard_at and not self._done(e["response"]["id"], before=heard_at)
        ]
        if answering or not heard["transcript"].strip():
            for response_id in answering:
                await self.received.wait(lambda rid=response_id: self._done(rid), TURN_TIMEOUT_S)
            return None
        created = await self.received.wait(
            lambda: self.received.find("response.created", heard_at), TURN_TIMEOUT_S
        )
        return created[1]["response"]["id"]

    async def _answer_begins(self, speech_end: float) -> dict[str, Any]:
        """The `response.created` of the turn that ends after `speech_end`."""
        stopped = await self.received.wait(
            lambda: self.received.find("input_audio_buffer.speech_stopped", speech_end),
            TURN_TIMEOUT_S,
        )
        return (
            await self.received.wait(
                lambda: self.received.find("response.created", stopped[0]), TURN_TIMEOUT_S
            )
        )[1]

    def _done(
        self, response_id: str, before: float = float("inf")
    ) -> tuple[float, dict[str, Any]] | None:
        return next(
            (
                (t, e)
                for t, e in self.received.all("response.done")
                if e["response"]["id"] == response_id and t < before
            ),
            None,
        )

    def _voice_turn(self, question: str, end: float, response_id: str | None) -> VoiceTurn:
        find = self.received.find
        stopped = find("input_audio_buffer.speech_stopped", end)
        item_id = stopped[1]["item_id"] if stopped else None
        transcribed = find(
            "conversation.item.input_audio_transcription.completed", end, item_id=item_id
        )
        created = None
        if response_id is not None:
            created = next(
                (t, e)
                for t, e in self.received.all("response.created")
                if e["response"]["id"] == response_id
            )
        deltas = self.received.all("response.output_audio.delta", response_id=response_id)
        transcript = find("response.output_audio_transcript.done", end, response_id=response_id)
        done = self._done(response_id) if response_id else None
        first_token = self.llm.first_token(after=end) if created else None

        def since_end(moment: float | None) -> float | None:
            return None if moment is None else 1000 * (moment - end)

        return VoiceTurn(
            detection=self.detection["type"],
            question=question,
            heard=transcribed[1]["transcript"] if transcribed else "",
            end_of_turn_ms=since_end(stopped[0] if stopped else None),
            transcribed_ms=since_end(transcribed[0] if transcribed else None),
            response_ms=since_end(created[0] if created else None),
            llm_first_token_ms=since_end(first_token),
            first_audio_ms=since_end(deltas[0][0] if deltas else None),
            status=done[1]["response"]["status"] if done else None,
            answer=transcript[1]["transcript"] if transcript else "",
            audio=b"".join(base64.b64decode(e["delta"]) for _, e in deltas),
        )

    async def _barge_ins(
        self,
        microphone: Microphone,
        question: str,
        interruptions: Sequence[str],
        interrupt_after_s: float,
    ) -> list[BargeIn]:
        """`question`, then each interruption spoken over the answer to the one before it."""
        if not interruptions:
            return []
        results = []
        _, end = microphone.say(self.utterances[question])
        previous = question
        for interruption in interruptions:
            created = await self._answer_begins(microphone.moment(end))
            response_id = created["response"]["id"]
            await self.received.wait(
                lambda rid=response_id: self.received.find(
                    "response.output_audio.delta", 0.0, response_id=rid
                ),
                TURN_TIMEOUT_S,
            )
            await asyncio.sleep(interrupt_after_s)
            first, end = microphone.say(self.utterances[interruption])
            done_at, done = await self.received.wait(
                lambda rid=response_id: self._done(rid), TURN_TIMEOUT_S
            )
            due = microphone.moment(first)  # when it is due to leave: no event comes earlier
            started_at, _ = await self.received.wait(  # sent just before the cancelled response.done
                lambda at=due: self.received.find("input_audio_buffer.speech_started", at),
                TURN_TIMEOUT_S,
            )
            start = microphone.moment(first)
            deltas = [
                t
                for t, _ in self.received.all(
                    "response.output_audio.delta", response_id=response_id
                )
            ]
            results.append(
                BargeIn(
                    detection=self.detection["type"],
                    question=previous,
                    interruption=interruption,
                    speech_started_ms=1000 * (started_at - start),
                    done_ms=1000 * (done_at - start),
                    last_audio_ms=1000 * (deltas[-1] - start),
                    status=done["response"]["status"],
                    audio_after_done=sum(1 for t in deltas if t > done_at),
                )
            )
            previous = interruption
            self.advance()
        # The last interruption's answer is not measured: stopped once it begins.
        last = (await self._answer_begins(microphone.moment(end)))["response"]["id"]
        if not self._done(last):
            await self.socket.send(json.dumps({"type": "response.cancel", "response_id": last}))
        await self.received.wait(lambda: self._done(last), TURN_TIMEOUT_S)
        self.advance()
        return results
