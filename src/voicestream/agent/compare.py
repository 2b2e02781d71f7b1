"""Time to first audio of each agent mode, measured against a running agent.

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

import asyncio
import contextlib
import json
import statistics
import time
import uuid
from collections.abc import AsyncGenerator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from voicestream.protocol import AGENT_MODES, DEFAULT_VOICE, SSEDecoder


class CompareError(RuntimeError):
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
) -> list[ModeResult]:
    """Ask the agent at `target` (its base URL, or an AgentCore runtime ARN) the same
    `prompt` in each of `modes`, `trials` times, one answer at a time.

    With `warmup` one unmeasured `bidi` answer goes first, so that no mode pays for loading
    the model or opening connections. An answer that ends in an `error` event is kept with
    its `error` set (`code: message`); an agent that cannot be reached raises `CompareError`.
    """
    unknown = [mode for mode in modes if mode not in AGENT_MODES]
    if unknown or trials < 1:
        raise ValueError(f"modes must be among {', '.join(AGENT_MODES)} and trials at least 1")
    if warmup:
        await _measure(target, prompt, "bidi", -1, voice, speed, timeout_s)
    results = []
    for trial in range(trials):
        for mode in modes:
            results.append(await _measure(target, prompt, mode, trial, voice, speed, timeout_s))
    return results


async def _measure(
    target: str, prompt: str, mode: str, trial: int, voice: str, speed: float, timeout_s: float
) -> ModeResult:
    payload = {"prompt": prompt, "mode": mode, "voice": voice, "speed": speed}
    first_text = first_audio = None
    chunks = 0
    audio_s = 0.0
    end: dict[str, Any] = {}
    error = None
    started = time.perf_counter()
    async with contextlib.aclosing(_events(target, payload, timeout_s)) as events:
        async for arrived, event in events:
            elapsed_ms = (arrived - started) * 1000
            kind = event.get("type")
            if kind == "text_delta" and first_text is None:
                first_text = elapsed_ms
            elif kind == "audio_chunk":
                first_audio = elapsed_ms if first_audio is None else first_audio
                chunks += 1
            elif kind == "audio_stream_end":
                audio_s = float(event.get("duration_s", 0.0))
            elif kind == "error":
                error = f"{event.get('code')}: {event.get('message')}"
            elif kind == "agent_end":
                end = event
    return ModeResult(
        mode=mode,
        trial=trial,
        first_text_ms=first_text,
        first_audio_ms=first_audio,
        total_ms=(time.perf_counter() - started) * 1000,
        chunks=chunks,
        audio_s=audio_s,
        agent_ttfa_ms=end.get("ttfa_ms"),
        first_sentence_ms=end.get("first_sentence_ms"),
        first_sentence_synthesis_s=end.get("first_sentence_synthesis_s"),
        error=error,
    )


def _events(
    target: str, payload: dict[str, Any], timeout_s: float
) -> AsyncGenerator[tuple[float, dict[str, Any]], None]:
    """(arrival time, event) for each event of one answer."""
    if target.startswith("arn:"):
        return _agentcore_events(target, payload, timeout_s)
    return _http_events(target, payload, timeout_s)


async def _http_events(
    url: str, payload: dict[str, Any], timeout_s: float
) -> AsyncGenerator[tuple[float, dict[str, Any]], None]:
    decoder = SSEDecoder()
    timeout = httpx.Timeout(timeout_s, connect=10.0)
    try:
        async with (
            httpx.AsyncClient(timeout=timeout) as client,
            client.stream(
                "POST",
                url.rstrip("/") + "/invocations",
                json=payload,
                headers={"Accept": "text/event-stream"},
            ) as response,
        ):
            if response.status_code != 200:
                body = (await response.aread()).decode("utf-8", "replace")[:300]
                raise CompareError(f"the agent answered HTTP {response.status_code}: {body}")
            async for chunk in response.aiter_raw():
                arrived = time.perf_counter()
                for event in decoder.feed(chunk):
                    yield arrived, event.json()
    except httpx.HTTPError as error:
        raise CompareError(f"cannot reach the agent at {url}: {error}") from error
    for event in decoder.flush():
        yield time.perf_counter(), event.json()


async def _agentcore_events(
    arn: str, payload: dict[str, Any], timeout_s: float
) -> AsyncGenerator[tuple[float, dict[str, Any]], None]:
    """The answer of a deployed runtime; boto3 blocks, so it reads in a thread and the
    arrival times are taken there."""
    chunks = await asyncio.to_thread(_read_agentcore, arn, payload, timeout_s)
    decoder = SSEDecoder()
    for arrived, chunk in chunks:
        for event in decoder.feed(chunk):
            yield arrived, event.json()
    for event in decoder.flush():
        yield time.perf_counter(), event.json()


def _read_agentcore(
    arn: str, payload: dict[str, Any], timeout_s: float
) -> list[tuple[float, bytes]]:
    try:
        import boto3
        from botocore.config import Config
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError as error:
        raise CompareError("an AgentCore ARN needs boto3: install the `aws` extra") from error
    region = arn.split(":")[3]
    client = boto3.client(
        "bedrock-agentcore", region_name=region, config=Config(read_timeout=int(timeout_s))
    )
    try:
        response = client.invoke_agent_runtime(
            agentRuntimeArn=arn,
            runtimeSessionId=f"voicestream-compare-{uuid.uuid4().hex}",
            payload=json.dumps(payload).encode("utf-8"),
            contentType="application/json",
            accept="text/event-stream",
        )
        return [(time.perf_counter(), chunk) for chunk in response["response"].iter_chunks()]
    except (BotoCoreError, ClientError) as error:
        raise CompareError(f"cannot invoke the AgentCore runtime {arn}: {error}") from error


# --- the table ------------------------------------------------------------------------------

_COLUMNS = (
    ("mode", 12),
    ("n", 3),
    ("first text ms", 13),
    ("first audio ms", 14),
    ("total ms", 9),
    ("chunks", 6),
    ("audio s", 7),
    ("lower bound ms", 14),
    ("gap ms", 7),
)


def format_table(results: Iterable[ModeResult]) -> str:
    """Mean figures per mode as a plain table, then how much sooner `bidi` speaks than each
    batch mode, and the answers that failed."""
    results = list(results)
    modes = list(dict.fromkeys(result.mode for result in results))
    lines = ["  ".join(f"{name:>{width}}" for name, width in _COLUMNS)]
    first_audio: dict[str, float | None] = {}
    for mode in modes:
        ok = [r for r in results if r.mode == mode and r.error is None]
        first_audio[mode] = _mean(r.first_audio_ms for r in ok)
        cells = (
            mode,
            str(len(ok)),
            _ms(_mean(r.first_text_ms for r in ok)),
            _ms(first_audio[mode]),
            _ms(_mean(r.total_ms for r in ok)),
            _ms(_mean(r.chunks for r in ok)),
            _seconds(_mean(r.audio_s for r in ok)),
            _ms(_mean(r.lower_bound_ms for r in ok)),
            _ms(_mean(r.gap_ms for r in ok)),
        )
        lines.append("  ".join(f"{cell:>{width}}" for cell, (_, width) in zip(cells, _COLUMNS)))
    bidi = first_audio.get("bidi")
    for other in ("batch", "batch-stream"):
        baseline = first_audio.get(other)
        if bidi and baseline:
            lines.append(_speedup(bidi, baseline, other))
    for result in results:
        if result.error is not None:
            lines.append(f"failed: {result.mode} (trial {result.trial + 1}): {result.error}")
    return "\n".join(lines)


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
