"""The agent page in Chromium against the real agent, local LLM and speech server: the
answer is heard in the page, its figures are shown, compare mode puts bidi's first audio
before batch's, and Stop silences the page and ends the answer on the server."""

from __future__ import annotations

import time
from pathlib import Path

from tests.web.browser import SOUND_LEVEL, PageVisit

PROMPT = "Why is the sky blue?"
STOP_AND_TIME_SILENCE = """
async () => {
  const player = window.voicestream.player;
  const clicked = performance.now();
  document.getElementById("stop").click();
  while (player.level() > 0.001) {
    if (performance.now() - clicked > 2000) return null;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  return performance.now() - clicked;
}
"""


def ask(opened: PageVisit, prompt: str, mode: str) -> None:
    page = opened.page
    page.wait_for_selector("#voice option[value=af_heart]", state="attached")
    page.fill("#prompt", prompt)
    page.select_option("#mode", mode)
    page.click("#send")


def figure_ms(opened: PageVisit, mode: str, name: str) -> int:
    value = opened.page.get_attribute(f"article[data-mode={mode}]", f"data-{name}-ms")
    assert value is not None, f"no {name} figure for {mode}"
    return int(value)


def wait_until(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_answer_is_heard_and_stop_silences_it(visit, agent_url, agent_app, long_winded_llm, tmp_path: Path):
    opened = visit(f"{agent_url}/")
    ask(opened, "Tell me a long story about a lighthouse keeper and the sea.", "bidi")

    opened.page.wait_for_function("window.__ear.soundAt !== null", timeout=90_000)
    assert opened.page.inner_text("article[data-mode=bidi] [data-figure=ttfa]").endswith(" ms")
    assert figure_ms(opened, "bidi", "ttft") <= figure_ms(opened, "bidi", "ttfa")
    opened.page.screenshot(path=tmp_path / "agent-speaking.png")
    assert agent_app.state.service.active_answers == 1, "the long answer should still be running"

    silent_after_ms = opened.page.evaluate(STOP_AND_TIME_SILENCE)

    assert silent_after_ms is not None and silent_after_ms < 100, silent_after_ms
    wait_until(lambda: agent_app.state.service.active_answers == 0, 15, "the agent to end the answer")
    assert opened.page.inner_text("#status") == "Stopped."
    assert opened.ear()["peak"] > SOUND_LEVEL
    assert opened.hosts() == {"127.0.0.1"}, opened.requested


def test_compare_shows_bidi_first_audio_before_batch(visit, agent_url, tmp_path: Path):
    opened = visit(f"{agent_url}/")
    ask(opened, PROMPT, "compare")

    opened.page.wait_for_selector("article[data-mode=batch][data-done=true]", timeout=180_000)

    opened.page.screenshot(path=tmp_path / "agent-compare.png", full_page=True)
    assert opened.page.get_attribute("article[data-mode=bidi]", "data-done") == "true"
    assert figure_ms(opened, "bidi", "ttfa") < figure_ms(opened, "batch", "ttfa")
    for mode in ("bidi", "batch"):
        assert figure_ms(opened, mode, "ttft") < figure_ms(opened, mode, "total")
        assert opened.page.locator(f"article[data-mode={mode}] .timeline rect.audio-mark").count() > 0
        assert opened.page.inner_text(f"article[data-mode={mode}] .text").strip()
    assert opened.ear()["peak"] > SOUND_LEVEL
    assert opened.page.inner_text("#status") == ""
    assert opened.hosts() == {"127.0.0.1"}, opened.requested
