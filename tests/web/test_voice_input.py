"""Voice input in Chromium: a question spoken by the engine plays through the fake
microphone; Talk, Talk again, and the page shows what the agent heard and plays its answer."""

from __future__ import annotations

from pathlib import Path

from tests.asr import words
from tests.web.browser import SOUND_LEVEL, microphone_page, spoken_wav

QUESTION = "What is the capital of France?"


def test_spoken_question_is_transcribed_and_answered(playwright, engine, agent_url, tmp_path: Path):
    question = tmp_path / "question.wav"
    seconds = spoken_wav(engine, QUESTION, question)
    with microphone_page(playwright, question, f"{agent_url}/") as opened:
        page = opened.page
        page.click("#talk")
        page.wait_for_function("document.getElementById('talk').textContent === 'Send recording'")
        page.wait_for_timeout(seconds * 1000 + 700)
        page.click("#talk")

        page.wait_for_selector("article .heard:not([hidden])", timeout=90_000)
        heard = page.inner_text("article .heard")
        assert {"capital", "france"} <= set(words(heard)), heard
        page.wait_for_function("window.__ear.soundAt !== null", timeout=90_000)
        page.screenshot(path=tmp_path / "voice-answer.png")
        assert page.inner_text("article .text").strip()
        assert opened.ear()["peak"] > SOUND_LEVEL
        assert page.inner_text("#status") == ""
        page.click("#stop")
        assert opened.hosts() == {"127.0.0.1"}, opened.requested
