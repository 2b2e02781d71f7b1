"""Driving Debian's Chromium with Playwright, with ears.

Every page gets `EAR`, a script that listens to the page's player (its AnalyserNode, the
last node before the speakers) and records in `window.__ear` the loudest level heard and
when sound was first heard, and every request the page makes is logged so that a test can
check that none left 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import wave
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
from playwright.sync_api import Browser, Page, Playwright

from voicestream.audio import float_to_pcm16
from voicestream.audio.resample import resample
from voicestream.bench.chromium import SOUND_LEVEL, ChromiumMissing
from voicestream.bench.chromium import launch_chromium as launch
from voicestream.engine import KokoroEngine
from voicestream.engine.offline import synthesize

__all__ = ["SOUND_LEVEL", "PageVisit", "launch_chromium", "microphone_page", "open_page", "spoken_wav"]

EAR = f"""
window.__ear = {{ peak: 0, soundAt: null, silentSince: null }};
setInterval(() => {{
  const player = window.voicestream && window.voicestream.player;
  if (!player) return;
  const level = player.level();
  const ear = window.__ear;
  ear.peak = Math.max(ear.peak, level);
  if (level > {SOUND_LEVEL}) {{
    ear.silentSince = null;
    if (ear.soundAt === null) ear.soundAt = performance.now();
  }} else if (ear.silentSince === null) {{
    ear.silentSince = performance.now();
  }}
}}, 5);
"""


@dataclass
class PageVisit:
    """A page and every URL it requested (HTTP and WebSocket)."""

    page: Page
    requested: list[str] = field(default_factory=list)

    def hosts(self) -> set[str]:
        return {urlsplit(url).hostname or "" for url in self.requested}

    def ear(self) -> dict:
        return self.page.evaluate("window.__ear")


def launch_chromium(playwright: Playwright, *extra_args: str) -> Browser:
    try:
        return launch(playwright, *extra_args)
    except ChromiumMissing as missing:
        pytest.fail(str(missing))


def open_page(browser: Browser, url: str) -> PageVisit:
    """`url` in a fresh context, with the ear installed and its requests logged."""
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    page = context.new_page()
    visit = PageVisit(page)
    page.on("request", lambda request: visit.requested.append(request.url))
    page.on("websocket", lambda socket: visit.requested.append(socket.url))
    page.add_init_script(EAR)
    page.goto(url)
    return visit


def spoken_wav(engine: KokoroEngine, text: str, path: Path, rate: int = 24000, pause_s: float = 0.0) -> float:
    """`text` spoken by the session's engine (as `voicestream say` would), written to ``path``
    as a 16-bit WAV at ``rate`` (a microphone's) with ``pause_s`` of silence after it, for
    Chromium's fake microphone; returns the speech's length in seconds. In process: a `say`
    process would load the model again for one sentence."""
    speech = resample(synthesize(engine, text), engine.sample_rate, rate)
    samples = np.concatenate([speech, np.zeros(int(pause_s * rate), dtype=speech.dtype)])
    with wave.open(str(path), "wb") as recording:
        recording.setnchannels(1)
        recording.setsampwidth(2)
        recording.setframerate(rate)
        recording.writeframes(float_to_pcm16(samples).tobytes())
    return speech.size / rate


@contextlib.contextmanager
def microphone_page(playwright: Playwright, wav: Path, url: str) -> Iterator[PageVisit]:
    """`url` (the agent page) in a Chromium whose fake microphone plays ``wav`` in a loop,
    its permission granted, once the page has its voices; the browser closes after."""
    microphone = launch_chromium(
        playwright,
        "--use-fake-device-for-media-stream",
        "--use-fake-ui-for-media-stream",
        f"--use-file-for-fake-audio-capture={wav}",
    )
    try:
        opened = open_page(microphone, url)
        opened.page.wait_for_selector("#voice option[value=af_heart]", state="attached")
        yield opened
    finally:
        microphone.close()
