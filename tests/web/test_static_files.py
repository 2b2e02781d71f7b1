"""The pages' files: everything they load is their own (no other host, no build step), both
apps serve them, and the agent relays its speech server's voice list for its page."""

from __future__ import annotations

import re

import httpx
import pytest

from voicestream.agent.voices import voices_url
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


@pytest.mark.parametrize(
    ("speech_url", "expected"),
    [
        ("ws://127.0.0.1:8080/invocations-bidirectional-stream", "http://127.0.0.1:8080/voices"),
        ("wss://speech.example/invocations-bidirectional-stream?x=1", "https://speech.example/voices"),
        ("http://127.0.0.1:9000", "http://127.0.0.1:9000/voices"),
        ("sagemaker://kokoro-82m", None),
    ],
)
def test_the_agent_asks_its_speech_server_for_voices(speech_url, expected):
    assert voices_url(speech_url) == expected


def test_the_agent_page_lists_the_speech_servers_voices(agent_url, speech_server):
    relayed = httpx.get(f"{agent_url}/voices", timeout=30)
    direct = httpx.get(f"{speech_server}/voices", timeout=30)

    assert relayed.status_code == 200
    assert relayed.json() == direct.json() and relayed.json()["voices"]
