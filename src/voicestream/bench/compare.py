"""Time to first audio of each agent mode, measured against a running agent (`voicestream
compare`, `agent-infra demo`, `voicestream bench e2e`).

The same prompt goes to the agent once per mode (and per trial, the modes taking turns), over
HTTP to an agent's URL (`voicestream agent`, a container) or through the Bedrock AgentCore
API to a runtime's ARN. Times are taken here, as a caller sees them, from sending the request
to the arrival of the first text, the first audio and the last event.

For a `bidi` answer the agent also reports when its first sentence left for the speech
server (`first_sentence_ms`) and how long the server took to synthesize it
(`first_sentence_synthesis_s`). Their sum is the lower bound of bidi's time to first audio
(the engine speaks a sentence once it is synthesized), and the gap between the agent's own
time to first audio and that bound is what the pipeline itself costs (queueing, the
sockets, base64). The batch modes have no such bound: their one request is the whole
answer, which `batch-stream` starts to hear long before it is all synthesized.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from voicestream.client import AgentAnswer, AgentClientError, AsyncAgentClient
from voicestream.protocol import AGENT_MODES, DEFAULT_VOICE

CompareError = AgentClientError
"""The agent could not be reached or did not answer with an event stream."""


@dataclass(frozen=True, slots=True)
class ModeResult:
    """One answer in one mode. Times in ms; `first_*_ms` and `total_ms` on the caller's clock,
    `agent_ttfa_ms` and `first_sentence_ms` on the agent's (since its `agent_start`)."""

    mode: str
    trial: int
    first_text_ms: float | None
    first_audio_ms: float | None
    total_ms: float
    chunks: int
    audio_s: float
    agent_ttfa_ms: float | None
    first_sentence_ms: float | None
    first_sentence_synthesis_s: float | None
    error: str | None = None
    stalls: int = 0
    stalled_ms: float = 0.0
    text: str = ""
    audio: bytes = b""

    @classmethod
    def of(cls, answer: AgentAnswer, trial: int, playback: Playback) -> ModeResult:
        end = answer.end
        return cls(
            mode=answer.mode,
            trial=trial,
            first_text_ms=answer.first_text_ms,
            first_audio_ms=answer.first_audio_ms,
            total_ms=answer.total_ms,
            chunks=answer.chunks,
            audio_s=answer.audio_s,
            agent_ttfa_ms=end.ttfa_ms if end else None,
            first_sentence_ms=end.first_sentence_ms if end else None,
            first_sentence_synthesis_s=end.first_sentence_synthesis_s if end else None,
            error=f"{answer.error.code}: {answer.error.message}" if answer.error else None,
            stalls=playback.stalls,
            stalled_ms=playback.stalled_ms,
            text=answer.text,
            audio=bytes(answer.audio),
        )

    @property
    def lower_bound_ms(self) -> float | None:
        """For `bidi`, the earliest the agent could have sent audio: the first sentence out
        plus its synthesis; None for the other modes."""
        if self.mode != "bidi" or self.first_sentence_ms is None:
            return None
        if self.first_sentence_synthesis_s is None:
            return None
        return self.first_sentence_ms + self.first_sentence_synthesis_s * 1000

    @property
    def gap_ms(self) -> float | None:
        """For `bidi`, the agent's time to first audio beyond the lower bound."""
        bound = self.lower_bound_ms
        if bound is None or self.agent_ttfa_ms is None:
            return None
        return self.agent_ttfa_ms - bound


async def compare(
    target: str,
    prompt: str,
    modes: Sequence[str] = AGENT_MODES,
    trials: int = 1,
    *,
    voice: str = DEFAULT_VOICE,
    speed: float = 1.0,
    warmup: bool = True,
    timeout_s: float = 300.0,
    api_key: str | None = None,
) -> list[ModeResult]:
    """Ask the agent at `target` (its base URL, or an AgentCore runtime ARN) the same
    `prompt` in each of `modes`, `trials` times, one answer at a time.

    With `warmup` one unmeasured `bidi` answer goes first, so that no mode pays for loading
    the model or opening connections. `api_key` is the agent's key, if it has one. An answer that ends in an `error` event is kept with
    its `error` set (`code: message`); an agent that cannot be reached raises `CompareError`.
    """
    unknown = [mode for mode in modes if mode not in AGENT_MODES]
    if unknown or trials < 1:
        raise ValueError(f"modes must be among {', '.join(AGENT_MODES)} and trials at least 1")
    results = []
    async with AsyncAgentClient(target, timeout_s=timeout_s, api_key=api_key) as client:
        if warmup:
            await client.ask(prompt, "bidi", voice, speed)
        for trial in range(trials):
            for mode in modes:
                results.append(await measure(client, prompt, mode, trial, voice, speed))
    return results


@dataclass(slots=True)
class Playback:
    """A listener who starts playing at the first audio and plays in real time: a chunk
    that arrives after everything before it has played is a stall (a silent gap)."""

    ends_at_ms: float | None = None
    stalls: int = 0
    stalled_ms: float = 0.0

    def add(self, at_ms: float, seconds: float) -> None:
        if self.ends_at_ms is not None and at_ms > self.ends_at_ms:
            self.stalls += 1
            self.stalled_ms += at_ms - self.ends_at_ms
        start = at_ms if self.ends_at_ms is None else max(at_ms, self.ends_at_ms)
        self.ends_at_ms = start + seconds * 1000


async def measure(
    client: AsyncAgentClient,
    prompt: str,
    mode: str,
    trial: int = 0,
    voice: str = DEFAULT_VOICE,
    speed: float = 1.0,
) -> ModeResult:
    """One answer in `mode`, with its stalls for a listener playing the pcm16 audio."""
    answer, playback = AgentAnswer(mode), Playback()
    async for received in client.events(prompt, mode, voice, speed):
        before = len(answer.audio)
        answer.add(received)
        if len(answer.audio) > before and answer.sample_rate:
            playback.add(received.at_ms, (len(answer.audio) - before) / 2 / answer.sample_rate)
    return ModeResult.of(answer, trial, playback)


# --- the table ------------------------------------------------------------------------------

_COLUMNS = (
    ("mode", 12),
    ("n", 3),
    ("first text ms", 13),
    ("first audio ms", 14),
    ("total ms", 9),
    ("chunks", 6),
    ("audio s", 7),
    ("stalls", 6),
    ("stalled ms", 10),
    ("lower bound ms", 14),
    ("gap ms", 7),
)


MODE_COLUMNS = [name for name, _ in _COLUMNS]


def mode_rows(results: Iterable[ModeResult]) -> list[list[str | int | float | None]]:
    """One row per mode, in `MODE_COLUMNS` order: means over the answers that did not fail."""
    results = list(results)
    rows: list[list[str | int | float | None]] = []
    for mode in dict.fromkeys(result.mode for result in results):
        ok = [r for r in results if r.mode == mode and r.error is None]
        rows.append([
            mode,
            len(ok),
            _mean(r.first_text_ms for r in ok),
            _mean(r.first_audio_ms for r in ok),
            _mean(r.total_ms for r in ok),
            _mean(r.chunks for r in ok),
            _mean(r.audio_s for r in ok),
            _mean(r.stalls for r in ok),
            _mean(r.stalled_ms for r in ok),
            _mean(r.lower_bound_ms for r in ok),
            _mean(r.gap_ms for r in ok),
        ])
    return rows


def mode_notes(results: Iterable[ModeResult]) -> list[str]:
    """How much sooner `bidi` speaks than each batch mode, and the answers that failed."""
    results = list(results)
    first_audio = {row[0]: row[3] for row in mode_rows(results)}
    bidi = first_audio.get("bidi")
    lines = [
        _speedup(bidi, baseline, other)  # type: ignore[arg-type]
        for other in ("batch", "batch-stream")
        if bidi and (baseline := first_audio.get(other))
    ]
    lines += [
        f"failed: {r.mode} (trial {r.trial + 1}): {r.error}" for r in results if r.error is not None
    ]
    return lines


def format_table(results: Iterable[ModeResult]) -> str:
    """Mean figures per mode as a plain table, then how much sooner `bidi` speaks than each
    batch mode, and the answers that failed."""
    results = list(results)
    formats = (str, str, _ms, _ms, _ms, _ms, _seconds, _seconds, _ms, _ms, _ms)
    lines = ["  ".join(f"{name:>{width}}" for name, width in _COLUMNS)]
    for row in mode_rows(results):
        cells = [fmt(value) for fmt, value in zip(formats, row, strict=True)]
        lines.append("  ".join(f"{cell:>{width}}" for cell, (_, width) in zip(cells, _COLUMNS, strict=True)))
    return "\n".join(lines + mode_notes(results))


def _speedup(bidi_ms: float, baseline_ms: float, baseline: str) -> str:
    if baseline_ms >= bidi_ms:
        return f"bidi time to first audio is {baseline_ms / bidi_ms:.1f}× faster than {baseline}"
    return f"bidi time to first audio is {bidi_ms / baseline_ms:.1f}× slower than {baseline}"


def _mean(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.fmean(present) if present else None


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
