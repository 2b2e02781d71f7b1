"""``voicestream bench page``: the agent page's first sound as the listener hears it, in Chromium.

A real speech server and the agent with the local LLM (seeded as in ``bench e2e``, latency
mode: bidi with the agent's default first clause) run on 127.0.0.1; Chromium opens the
agent page with ``?start_buffer_ms=N`` (the player's start buffer), a prompt is typed and
Send clicked. Each setting (the speech server's first vocoder window, ``serve
--first-window-ms``, and the start buffer) has a page of its own, and they take turns on
every prompt, so the shared machine's noise falls on them alike. An ear in the page polls the player's AnalyserNode (the last node before the
speakers) every 5 ms; the first sound is the first poll above ``SOUND_LEVEL`` after the
click, both on the page's ``performance.now()``. Beside it: the page's own time to first
audio (when the player reported its first sample played, counted from its Send handler),
the first chunk's arrival, how much audio the player had queued when it started, and the
stalls the page counted once the answer was done.

Each page's first question is an unmeasured warm-up (heard, then stopped): it makes the
player (an AudioContext and its worklet) and, on the first page, warms the LLM and the
engine. Every measured question starts a new conversation, so that the same prompt gets
the same answer under every setting.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import re
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from voicestream.bench.chaos import until_idle
from voicestream.bench.chromium import SOUND_LEVEL, launch_chromium
from voicestream.bench.compare import Playback
from voicestream.bench.e2e import LLM_MAX_TOKENS, LLM_SEED
from voicestream.bench.report import Chart, Report, Table, machine_context, progress
from voicestream.bench.texts import LONG_OPENING_PROMPTS
from voicestream.engine import KokoroEngine
from voicestream.engine.vocoder import FIRST_WINDOW_S, SAMPLE_RATE
from voicestream.logs import quiet_agentcore_logs
from voicestream.server import running_server

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

START_BUFFERS_MS = (0,)
"""An 80 or 160 ms start buffer changed nothing but the noise (docs/BENCHMARKS.md)."""
DEFAULT_START_BUFFER_MS = 0
"""The player's own default (`PcmPlayer.create`): what the page plays with unless told."""
FIRST_SOUND_GOAL_MS = 900.0
"""Issue 20's goal for the median first sound after the click, at the default buffer."""
PAGE_LOAD_TIMEOUT_S = 60.0
SOUND_TIMEOUT_S = 120.0
"""The first sound of an answer on a busy shared CPU: the LLM's first words and a synthesis."""
ANSWER_TIMEOUT_S = 180.0
"""How long an answer may play before it is stopped (a long answer is measured all the same)."""
QUIET_TIMEOUT_MS = 2000
IDLE_METRICS = ("voicestream_queue_depth", "voicestream_rendering_pieces")
SETTLE_TIMEOUT_S = 60.0
"""The most a stopped warm-up's last render may take to end on a loaded machine."""

EAR = f"""
window.__ear = {{ clickAt: null, soundAt: null, started: null, hooked: false }};
setInterval(() => {{
  const ear = window.__ear;
  const player = window.voicestream && window.voicestream.player;
  if (!player || ear.clickAt === null || ear.soundAt !== null) return;
  if (player.level() > {SOUND_LEVEL}) ear.soundAt = performance.now();
}}, 5);
"""
"""The ear: armed by the click, it keeps the first poll that heard sound."""

CLICK_SEND = f"""
async () => {{
  const ear = window.__ear;
  const player = window.voicestream.player;
  if (!ear.hooked) {{
    player.on("started", (message) => {{ ear.started = message; }});
    const push = player.push.bind(player);
    player.push = (bytes, tag) => {{
      ear.arrivals.push([performance.now() - ear.clickAt, bytes.length / 2 / {SAMPLE_RATE}]);
      return push(bytes, tag);
    }};
    ear.hooked = true;
  }}
  const since = performance.now();
  while (player.level() > {SOUND_LEVEL} && performance.now() - since < {QUIET_TIMEOUT_MS}) {{
    await new Promise((resolve) => setTimeout(resolve, 5));
  }}
  Object.assign(ear, {{ soundAt: null, started: null, arrivals: [], clickAt: performance.now() }});
  document.getElementById("send").click();
}}
"""
"""Waits until the page is quiet, arms the ear and clicks Send, all in the page. Each audio
chunk the page hands its player is logged with its arrival and length (`PageTrial.arrival_stalls`)."""

TRIAL_FACTS = """
() => {
  const ear = window.__ear;
  const article = document.querySelector("#answers article");
  const view = window.voicestream.views.at(-1);
  const audio = view ? view.marks.find((mark) => mark.kind === "audio") : undefined;
  const text = view ? view.marks.find((mark) => mark.kind === "text") : undefined;
  const agent = view && view.agentEnd ? view.agentEnd : {};
  return {
    firstSoundMs: ear.soundAt === null ? null : ear.soundAt - ear.clickAt,
    ttfaMs: article && article.dataset.ttfaMs ? Number(article.dataset.ttfaMs) : null,
    firstChunkMs: audio ? audio.ms : null,
    firstTextMs: text ? text.ms : null,
    agentFirstTextMs: agent.ttft_ms ?? null,
    agentFirstAudioMs: agent.ttfa_ms ?? null,
    stalls: article && article.dataset.stalls ? Number(article.dataset.stalls) : null,
    arrivals: ear.arrivals,
    stallFigure: article ? article.querySelector("[data-figure=stalls]").textContent : "",
    queuedSeconds: ear.started ? ear.started.queuedSeconds : null,
    endedAtStart: ear.started ? ear.started.ended : null,
    status: document.getElementById("status").textContent,
  };
}
"""


class BrowserUnavailable(RuntimeError):
    """Playwright or Chromium is missing: the bench cannot run here."""


@dataclass(frozen=True, slots=True)
class PageTrial:
    """One question asked on the page; times in ms, counted as the page counts them."""

    first_window_ms: int
    """The speech server's first vocoder window (0: the first piece rendered whole)."""
    start_buffer_ms: int
    prompt: str
    first_sound_ms: float | None
    """First poll above the sound level, after the click."""
    page_first_audio_ms: float | None
    """`data-ttfa-ms`: the player's first sample, after the page's Send handler began."""
    first_chunk_ms: float | None
    """The first audio chunk's arrival in the page, on the same clock."""
    first_text_ms: float | None
    """The LLM's first text's arrival in the page, on the same clock."""
    agent_first_text_ms: float | None
    """`agent_end`'s `ttft_ms`: the LLM's first text, counted by the agent from its `agent_start`."""
    agent_first_audio_ms: float | None
    """`agent_end`'s `ttfa_ms`: the speech server's first audio reaching the agent, on the agent's clock."""
    queued_at_start_s: float | None
    """Audio the player held when its first sample played (the worklet's `started`)."""
    ended_at_start: bool | None
    """Whether the whole answer had arrived when the player started."""
    stalls: int | None
    stalled_ms: float
    arrival_stalls: int | None
    """Stalls of a listener who plays each chunk the moment it reaches the page
    (`voicestream.bench.compare.Playback`): as many as ``stalls``, the chunks came late;
    fewer, the page's playback lost time of its own. None: no chunk reached the player."""
    arrival_stalled_ms: float | None
    stopped: bool
    """The answer outlasted `ANSWER_TIMEOUT_S` and was stopped."""
    error: str | None

    @property
    def arrival_to_heard_ms(self) -> float | None:
        if self.first_sound_ms is None or self.page_first_audio_ms is None:
            return None
        return self.first_sound_ms - self.page_first_audio_ms


@dataclass(frozen=True, slots=True)
class PageReport:
    trials: list[PageTrial]
    settings: list[tuple[int, int]]
    """(first window ms, start buffer ms), in the order they took turns."""
    trials_per_buffer: int
    max_tokens: int
    machine: dict[str, object]
    """`machine_context()` taken before the run (its load average is the run's start)."""

    def to_report(self) -> Report:
        report = Report(
            "page",
            context={
                **self.machine,
                "trials": self.trials_per_buffer,
                "settings (first window ms, start buffer ms)": self.settings,
                "max tokens": self.max_tokens,
            },
        )
        summary = Table(
            "The agent page's first sound after the click, in Chromium (latency mode, local LLM)",
            ["first window ms", "start buffer ms", "trials", "first sound median ms", "min ms", "max ms", "page first audio median ms",
             "arrival→heard median ms", "queued at start median ms", "answers with a stall", "stalled ms total"],
            note=(
                "first sound: the ear's first 5 ms poll of the page's AnalyserNode above RMS "
                f"{SOUND_LEVEL} after the click; page first audio: the page's own figure (the player's "
                "first sample, from its Send handler); arrival→heard: their difference (the model's "
                "leading silence, the start buffer, the audio output's latency)."
            ),
        )
        for window, buffer in self.settings:
            rows = [t for t in self.trials if (t.first_window_ms, t.start_buffer_ms) == (window, buffer)]
            sounds = [t.first_sound_ms for t in rows if t.first_sound_ms is not None]
            summary.add(
                window,
                buffer,
                len(rows),
                _median(sounds),
                _round(min(sounds, default=None)),
                _round(max(sounds, default=None)),
                _median([t.page_first_audio_ms for t in rows]),
                _median([t.arrival_to_heard_ms for t in rows]),
                _median([None if t.queued_at_start_s is None else 1000 * t.queued_at_start_s for t in rows]),
                sum(1 for t in rows if t.stalls),
                round(sum(t.stalled_ms for t in rows)),
            )
        report.tables.append(summary)
        each = Table(
            "Every question",
            ["first window ms", "start buffer ms", "prompt", "first sound ms", "page first audio ms", "first chunk ms",
             "first text ms", "agent first text ms", "agent first audio ms", "queued at start ms", "stalls",
             "stalled ms", "stalls by arrival", "stalled ms by arrival", "stopped"],
            note=(
                "first text and first chunk: their arrival in the page, after the click; agent first text and "
                "first audio: the agent's own times (agent_end's ttft_ms and ttfa_ms), counted from its "
                "agent_start, so the LLM's share and the speech server's show apart from the page's; by "
                "arrival: for a listener who plays each chunk as it reaches the page (as many as the page's "
                "stalls: the audio came late; fewer: the page's playback lost time of its own)."
            ),
        )
        for t in self.trials:
            each.add(
                t.first_window_ms, t.start_buffer_ms, t.prompt, _round(t.first_sound_ms), _round(t.page_first_audio_ms),
                _round(t.first_chunk_ms), _round(t.first_text_ms), _round(t.agent_first_text_ms),
                _round(t.agent_first_audio_ms), _round(None if t.queued_at_start_s is None else 1000 * t.queued_at_start_s),
                t.stalls, round(t.stalled_ms), t.arrival_stalls, _round(t.arrival_stalled_ms), t.stopped,
            )
        report.tables.append(each)
        report.charts.append(
            Chart(
                "First sound after the click, median",
                [f"{w}/{b}" for w, b in self.settings],
                {"first sound": summary.column("first sound median ms"),  # type: ignore[dict-item]
                 "page first audio": summary.column("page first audio median ms")},  # type: ignore[dict-item]
                ylabel="ms",
                xlabel="first window ms / start buffer ms",
            )
        )
        report.notes.extend(self._summary())
        return report

    def _summary(self) -> list[str]:
        lines = []
        default_window = round(FIRST_WINDOW_S * 1000)
        default = [t.first_sound_ms for t in self.trials
                   if (t.first_window_ms, t.start_buffer_ms) == (default_window, DEFAULT_START_BUFFER_MS)
                   and t.first_sound_ms is not None]
        if default:
            median = statistics.median(default)
            verdict = "meets" if median <= FIRST_SOUND_GOAL_MS else "misses"
            lines.append(
                f"median first sound at the defaults (first window {default_window} ms, start buffer "
                f"{DEFAULT_START_BUFFER_MS} ms): {median:,.0f} ms, {verdict} the goal of ≤ {FIRST_SOUND_GOAL_MS:,.0f} ms"
            )
        else:
            lines.append(
                f"the defaults (first window {default_window} ms, start buffer {DEFAULT_START_BUFFER_MS} ms) were not measured"
            )
        for t in self.trials:
            if t.error:
                lines.append(f"failed: {t.prompt!r} at {t.first_window_ms}/{t.start_buffer_ms} ms: {t.error}")
        return lines


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 1) if present else None


def measure_page(
    engine: KokoroEngine,
    start_buffers_ms: Sequence[int] = START_BUFFERS_MS,
    trials: int = 5,
    prompts: Sequence[str] = LONG_OPENING_PROMPTS,
    max_tokens: int = LLM_MAX_TOKENS,
    first_windows_ms: Sequence[int] | None = None,
) -> PageReport:
    """`trials` questions (the prompts in turn) per setting, each setting on its own page,
    the settings taking turns on every prompt. ``first_windows_ms``: the speech server's
    first vocoder windows to compare (the engine's own when None); the engine's setting
    is changed between questions and restored at the end."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as missing:
        raise BrowserUnavailable("Playwright is not installed (the bench extra, or `uv sync`)") from missing
    from voicestream.agent.app import AgentSettings, create_app, running_agent
    from voicestream.agent.llm import create_model

    quiet_agentcore_logs()
    machine = machine_context()
    llm = create_model("local", max_tokens=max_tokens, seed=LLM_SEED)
    asked = [prompts[i % len(prompts)] for i in range(trials)]
    windows = [round(engine.first_window_s * 1000)] if first_windows_ms is None else list(first_windows_ms)
    settings = [(window, buffer) for window in windows for buffer in start_buffers_ms]
    results: list[PageTrial] = []
    saved = engine.first_window_s
    with (
        running_server(engine) as speech_url,
        running_agent(create_app(AgentSettings(speech_url=speech_url), llm=llm)) as agent_url,
        sync_playwright() as playwright,
        _browser(playwright) as browser,
        progress("bench page", len(settings) * (trials + 1)) as advance,
        contextlib.ExitStack() as pages,
    ):
        try:
            opened = {}
            for window, buffer in settings:
                engine.first_window_s = window / 1000
                opened[(window, buffer)] = page = pages.enter_context(
                    _page(browser, f"{agent_url}/?start_buffer_ms={buffer}")
                )
                _warm_up(page, asked[0], speech_url)
                advance()
            for prompt in asked:
                for window, buffer in settings:
                    engine.first_window_s = window / 1000
                    results.append(_ask(opened[(window, buffer)], window, buffer, prompt))
                    advance()
        finally:
            engine.first_window_s = saved
    return PageReport(results, settings, trials, max_tokens, machine)


@contextlib.contextmanager
def _browser(playwright: Any) -> Iterator[Browser]:
    try:
        browser = launch_chromium(playwright)
    except Exception as failed:  # ChromiumMissing, or Playwright's own launch error
        raise BrowserUnavailable(str(failed)) from failed
    try:
        yield browser
    finally:
        browser.close()


@contextlib.contextmanager
def _page(browser: Browser, url: str) -> Iterator[Page]:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(PAGE_LOAD_TIMEOUT_S * 1000)
        page.add_init_script(EAR)
        page.goto(url)
        page.wait_for_selector("#voice option[value=af_heart]", state="attached")
        yield page
    finally:
        context.close()


ANSWER_OVER = """
() => document.querySelector("#answers article[data-done=true]") !== null
  || document.getElementById("status").textContent !== ""
"""
"""The answer has played to its end, or the page shows an error."""


def _warm_up(page: Page, prompt: str, speech_url: str) -> None:
    """One question, stopped once its audio plays: the player exists from here on. Then
    the speech server is waited for until it renders and queues nothing, so that the
    stopped answer's last render ends before anything is measured (without a wait the first
    measured question shared the CPU with it: 1.3 s more). The LLM stops at its next token
    once the agent's turn is cancelled (`agent/local_llm.py`). A fixed 5 s pause did this
    before, on every page, at any machine's speed."""
    page.fill("#prompt", prompt)
    page.click("#send")
    page.wait_for_selector("#answers article[data-ttfa-ms]", timeout=SOUND_TIMEOUT_S * 1000)
    page.click("#stop")
    _until_speech_server_idle(speech_url)


def _until_speech_server_idle(speech_url: str) -> None:
    """`until_idle` on its own event loop, in a thread: Playwright's sync API owns this one's."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waited = pool.submit(asyncio.run, until_idle(speech_url, SETTLE_TIMEOUT_S, IDLE_METRICS, poll_s=0.05)).result()
    if waited is None:
        raise RuntimeError(f"the speech server still rendered {SETTLE_TIMEOUT_S:g} s after the warm-up was stopped")


def _ask(page: Page, window: int, buffer: int, prompt: str) -> PageTrial:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.click("#new-conversation")
    page.wait_for_function("document.querySelectorAll('#answers article').length === 0")
    page.fill("#prompt", prompt)
    page.evaluate(CLICK_SEND)
    stopped = False
    try:
        page.wait_for_function(ANSWER_OVER, timeout=ANSWER_TIMEOUT_S * 1000)
    except PlaywrightTimeout:
        stopped = True
        page.click("#stop")
    facts = page.evaluate(TRIAL_FACTS)
    error = None if stopped else facts["status"] or None
    arrived = Playback()
    for at_ms, seconds in facts["arrivals"]:
        arrived.add(at_ms, seconds)
    return PageTrial(
        first_window_ms=window,
        start_buffer_ms=buffer,
        prompt=prompt,
        first_sound_ms=facts["firstSoundMs"],
        page_first_audio_ms=facts["ttfaMs"],
        first_chunk_ms=facts["firstChunkMs"],
        first_text_ms=facts["firstTextMs"],
        agent_first_text_ms=facts["agentFirstTextMs"],
        agent_first_audio_ms=facts["agentFirstAudioMs"],
        queued_at_start_s=facts["queuedSeconds"],
        ended_at_start=facts["endedAtStart"],
        stalls=facts["stalls"],
        stalled_ms=_stalled_ms(facts["stallFigure"]),
        arrival_stalls=arrived.stalls if facts["arrivals"] else None,
        arrival_stalled_ms=arrived.stalled_ms if facts["arrivals"] else None,
        stopped=stopped,
        error=error,
    )


def _stalled_ms(figure: str) -> float:
    """The page's stall figure, "N (M ms silent)": M."""
    found = re.search(r"\((\d+) ms silent\)", figure)
    return float(found.group(1)) if found else 0.0
