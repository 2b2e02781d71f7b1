"""Voice input in Chromium: a question spoken by `voicestream say` plays through the fake
microphone; Talk, Talk again, and the page shows what the agent heard and plays its answer."""

from __future__ import annotations

import subprocess
import sys
import wave
from pathlib import Path

from tests.asr import words
from tests.web.browser import SOUND_LEVEL, launch_chromium, open_page

QUESTION = "What is the capital of France?"


def spoken_question(path: Path) -> float:
    """Writes QUESTION, spoken, as a WAV file at `path`; returns its length in seconds."""
    subprocess.run(
        [sys.executable, "-m", "voicestream.cli", "say", QUESTION, "-o", str(path)],
        check=True, timeout=180, capture_output=True,
    )
    with wave.open(str(path)) as recording:
        return recording.getnframes() / recording.getframerate()


def test_spoken_question_is_transcribed_and_answered(playwright, agent_url, tmp_path: Path):
    question = tmp_path / "question.wav"
    seconds = spoken_question(question)
    microphone = launch_chromium(
        playwright,
        "--use-fake-device-for-media-stream",
        "--use-fake-ui-for-media-stream",
        f"--use-file-for-fake-audio-capture={question}",
    )
    try:
        opened = open_page(microphone, f"{agent_url}/")
        page = opened.page
        page.wait_for_selector("#voice option[value=af_heart]", state="attached")

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
    finally:
        microphone.close()
