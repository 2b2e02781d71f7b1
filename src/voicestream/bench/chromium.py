"""Debian's Chromium, driven by Playwright: how `bench page` and the browser tests launch it.

The browser is the system's (`chromium` on PATH), never one that Playwright downloads: the
machines here install it with the system's package manager and reach no other host.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Playwright

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
]
SOUND_LEVEL = 0.01
"""RMS above which the analyser hears sound: Kokoro's speech is around 0.05 to 0.2."""


class ChromiumMissing(RuntimeError):
    """No `chromium` on PATH."""


def launch_chromium(playwright: Playwright, *extra_args: str) -> Browser:
    executable = shutil.which("chromium")
    if executable is None:
        raise ChromiumMissing("Debian's chromium is not installed (apt-get install chromium; .ci/run installs it)")
    return playwright.chromium.launch(executable_path=executable, args=[*CHROMIUM_ARGS, *extra_args])
