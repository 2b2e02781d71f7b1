"""The pages' files: everything they load is their own (no other host, no build step), and
both apps serve them."""

from __future__ import annotations

import re

import httpx
import pytest

from voicestream.web import STATIC_DIR, page_routes

ABSOLUTE_URL = re.compile(r"""(?:https?:|wss?:)?//[a-z0-9.-]+\.[a-z]{2,}""", re.IGNORECASE)
SVG_NAMESPACE = "http://www.w3.org/2000/svg"
"""An XML namespace name: an identifier that is never fetched."""


def test_no_file_names_another_host():
    files = [path for path in STATIC_DIR.rglob("*") if path.is_file()]
    assert {path.suffix for path in files} <= {".html", ".css", ".js"}
    for path in files:
        text = path.read_text(encoding="utf-8").replace(SVG_NAMESPACE, "")
        assert not ABSOLUTE_URL.search(text), f"{path.name} names another host"


def test_unknown_page_is_refused():
    with pytest.raises(ValueError):
        page_routes("nowhere.html")


@pytest.mark.parametrize(("base", "title"), [("speech_server", "speech playground"), ("agent_url", "agent")])
def test_apps_serve_their_page_and_its_modules(request, base, title):
    url = request.getfixturevalue(base)
    page = httpx.get(f"{url}/", timeout=30)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert f"<title>voicestream {title}</title>" in page.text
    for module in ("player.js", "pcm-worklet.js", "api.js"):
        script = httpx.get(f"{url}/web/js/{module}", timeout=30)
        assert script.status_code == 200, module
        assert "javascript" in script.headers["content-type"]
