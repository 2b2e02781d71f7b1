"""A real browser for the pages (see `browser`): one Chromium per test module, pages per test.

Per module, not per session: Playwright's sync API keeps its event loop marked as running on
the main thread while it is open, so a session-wide instance would break every asyncio test
that a pytest-xdist worker runs after the web tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Playwright, sync_playwright
from tests.web.browser import PageVisit, launch_chromium, open_page


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as instance:
        yield instance


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    chromium = launch_chromium(playwright)
    yield chromium
    chromium.close()


@pytest.fixture
def visit(browser: Browser, tmp_path: Path) -> Iterator[Callable[[str], PageVisit]]:
    """Open pages for one test; they close after it (a screenshot of each lands in tmp_path)."""
    visits: list[PageVisit] = []

    def start(url: str) -> PageVisit:
        visits.append(open_page(browser, url))
        return visits[-1]

    yield start
    for number, opened in enumerate(visits):
        opened.page.screenshot(path=tmp_path / f"page-{number}-at-end.png", full_page=True)
        opened.page.context.close()
