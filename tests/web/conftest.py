"""A real browser for the pages (see `browser`): one Chromium for the session, pages per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Playwright, sync_playwright
from tests.web.browser import PageVisit, launch_chromium, open_page


@pytest.fixture(scope="session")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as instance:
        yield instance


@pytest.fixture(scope="session")
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
