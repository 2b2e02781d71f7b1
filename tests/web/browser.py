"""Driving Debian's Chromium with Playwright, with ears.

Every page gets `EAR`, a script that listens to the page's player (its AnalyserNode, the
last node before the speakers) and records in `window.__ear` the loudest level heard and
when sound was first heard, and every request the page makes is logged so that a test can
check that none left 127.0.0.1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, Playwright

from voicestream.bench.chromium import SOUND_LEVEL, ChromiumMissing
from voicestream.bench.chromium import launch_chromium as launch

__all__ = ["SOUND_LEVEL", "PageVisit", "launch_chromium", "open_page"]

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
