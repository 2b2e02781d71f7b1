"""The agent page in Chromium against the real agent, local LLM and speech server: the
answer is heard in the page, its figures are shown, compare mode puts bidi's first audio
before batch's (on an answer its LLM holds, so by events rather than speed), and Stop
silences the page and ends the answer on the server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.agent.llm_stubs import AnswerHold
from tests.agent.realtime_checks import echo_agent
from tests.web.browser import SOUND_LEVEL, PageVisit

PROMPT = "Why is the sky blue?"
FOLLOW_THE_PLAYER = """
() => {
  // From the page's first player on: the audio the page pushed to it (seconds, per tag: a
  // sentence) and, from the worklet's own reports ("tag", "position"), how much it played.
  const audio = { pushed: 0, lengths: new Map(), finished: 0, tag: null, intoTag: 0 };
  audio.played = () => audio.finished + audio.intoTag;
  window.__audio = audio;
  let voicestream;
  Object.defineProperty(window, "voicestream", {
    configurable: true,
    get: () => voicestream,
    set: (value) => {
      voicestream = value;
      const player = value.player;
      const push = player.push.bind(player);
      player.push = (bytes, tag = null) => {
        const seconds = bytes.length / 2 / 24000;
        audio.pushed += seconds;
        audio.lengths.set(tag, (audio.lengths.get(tag) ?? 0) + seconds);
        push(bytes, tag);
      };
      player.on("tag", ({ tag }) => {
        if (audio.tag !== null) audio.finished += audio.lengths.get(audio.tag) ?? 0;
        audio.tag = tag;
        audio.intoTag = 0;
      });
      player.on("position", ({ seconds }) => { audio.intoTag = seconds; });
    },
  });
}
"""
STOP_WITH_AUDIO_AHEAD = """
async (least) => {
  // Click Stop once at least `least` seconds of audio wait in the player, unplayed; say how
  // much the page had pushed then.
  const audio = window.__audio;
  const deadline = performance.now() + 90000;
  while (audio.pushed - audio.played() < least) {
    if (performance.now() > deadline) return null;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const pushed = audio.pushed;
  document.getElementById("stop").click();
  return pushed;
}
"""
QUEUED_AT_STOP_S = 0.5


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
    """Stop is clicked while audio waits in the player: the player's own count of what it
    played (the page's "heard") ends short of what it was given, the page goes silent, the
    agent ends the answer, and nothing plays after the Stop (the worklet counts nothing more)."""
    opened = visit(f"{agent_url}/")
    opened.page.evaluate(FOLLOW_THE_PLAYER)
    ask(opened, "Tell me a long story about a lighthouse keeper and the sea.", "bidi")

    opened.page.wait_for_function("window.__ear.soundAt !== null", timeout=90_000)
    assert opened.page.inner_text("article[data-mode=bidi] [data-figure=ttfa]").endswith(" ms")
    assert figure_ms(opened, "bidi", "ttft") <= figure_ms(opened, "bidi", "ttfa")
    opened.page.screenshot(path=tmp_path / "agent-speaking.png")
    assert agent_app.state.service.active_answers == 1, "the long answer should still be running"

    pushed_s = opened.page.evaluate(STOP_WITH_AUDIO_AHEAD, QUEUED_AT_STOP_S)

    assert pushed_s is not None, f"the player never held {QUEUED_AT_STOP_S} s of audio ahead"
    opened.page.wait_for_function("window.voicestream.player.level() <= 0.001", timeout=30_000)
    wait_until(lambda: agent_app.state.service.active_answers == 0, 30, "the agent to end the answer")
    opened.page.wait_for_function("document.getElementById('status').innerText === 'Stopped.'")
    assert opened.page.get_attribute("article[data-mode=bidi]", "data-interrupted") == "true"
    heard_s = figure_ms(opened, "bidi", "heard") / 1000
    assert heard_s < pushed_s, (heard_s, pushed_s)  # the Stop cut the audio short
    played_since_stop = opened.page.evaluate("window.voicestream.player.stop()")
    assert played_since_stop == 0, f"{played_since_stop} s of audio played after the Stop"
    assert opened.ear()["peak"] > SOUND_LEVEL
    assert opened.hosts() == {"127.0.0.1"}, opened.requested


@pytest.fixture(scope="module")
def held_agent(speech_server: str) -> Iterator[tuple[str, AnswerHold]]:
    """An agent whose LLM (the OpenAI echo stub on loopback) holds each answer after its first
    sentence until the test lets it go; yields its URL and the hold."""
    hold = AnswerHold()
    with echo_agent(speech_server, hold=hold) as (url, _):
        yield url.replace("ws://", "http://"), hold


def test_compare_shows_bidi_first_audio_before_batch(visit, held_agent, tmp_path: Path):
    """Ordered by events, not by the machine's speed: bidi's answer plays while its LLM still
    holds the rest of it; batch's answer is held at least as long as bidi took to play, and
    nothing of it plays until the LLM has ended it. So bidi's first audio comes first on
    any machine, and the page's figures must say so."""
    url, hold = held_agent
    opened = visit(f"{url}/")
    ask(opened, PROMPT, "compare")

    bidi = hold.next_answer(timeout_s=60)
    opened.page.wait_for_selector("article[data-mode=bidi][data-ttfa-ms]", state="attached", timeout=120_000)
    bidi.release.set()
    bidi_ttfa_s = figure_ms(opened, "bidi", "ttfa") / 1000

    batch = hold.next_answer(timeout_s=120)
    opened.page.wait_for_selector("article[data-mode=batch][data-ttft-ms]", state="attached", timeout=60_000)
    time.sleep(max(0.0, batch.arrived_at + bidi_ttfa_s - time.monotonic()))
    assert opened.page.get_attribute("article[data-mode=batch]", "data-ttfa-ms") is None, "batch played a held answer"
    batch.release.set()
    opened.page.wait_for_selector("article[data-mode=batch][data-done=true]", state="attached", timeout=120_000)

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
