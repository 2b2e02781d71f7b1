"""In Chromium: a page of another site (another 127.0.0.1 port, so another origin) can neither
open the speech server's session nor make the agent answer, while the server's own page
still works, with a key from its `#key=` fragment sent as a WebSocket subprotocol."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tests.web.browser import PageVisit

from voicestream.server import free_port

KEY = "page-key-1"
ATTACK = """<!doctype html><title>another site</title><script>
window.results = {{}};
const socket = new WebSocket("{speech}".replace("http://", "ws://") + "/invocations-bidirectional-stream");
socket.onopen = () => {{ window.results.socket = "open"; }};
socket.onclose = (event) => {{ window.results.socket ??= "closed " + event.code; }};
fetch("{agent}/invocations", {{ method: "POST", mode: "no-cors", body: '{{"prompt":"Spend the credits."}}' }})
  .then(() => {{ window.results.fetch = "done"; }}, () => {{ window.results.fetch = "failed"; }});
</script>"""


@pytest.fixture
def other_site() -> Iterator[Callable[[str], str]]:
    """A second tiny HTTP server on another port, serving one page: `serve(html)` gives its URL."""
    pages: list[bytes] = []

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write(pages[-1])

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Page)
    thread = threading.Thread(target=server.serve_forever, name="other-site", daemon=True)
    thread.start()

    def serve(html: str) -> str:
        pages.append(html.encode())
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield serve
    server.shutdown()
    thread.join(timeout=10)


def test_another_sites_page_can_neither_open_a_session_nor_post_to_the_agent(
    visit: Callable[[str], PageVisit], other_site, speech_server: str, agent_url: str, agent_app
) -> None:
    statuses: dict[str, int] = {}
    page_url = other_site(ATTACK.format(speech=speech_server, agent=agent_url))
    opened = visit("about:blank")
    opened.page.on("response", lambda response: statuses.__setitem__(response.url, response.status))
    opened.page.goto(page_url)
    opened.page.wait_for_function("window.results.socket && window.results.fetch", timeout=30_000)
    results = opened.page.evaluate("window.results")
    assert results["socket"] != "open", results  # refused at the handshake (HTTP 403)
    assert statuses[f"{agent_url}/invocations"] == 415, statuses  # text/plain, sent without a preflight
    assert agent_app.state.service.active_answers == 0


def test_the_servers_own_page_speaks_with_a_key_from_its_fragment(
    visit: Callable[[str], PageVisit], make_speech_server
) -> None:
    url = make_speech_server(api_key=KEY)
    opened = visit(f"{url}/#key={KEY}")
    page = opened.page
    page.fill("#text", "Hello with a key.")
    page.click("#speak")
    page.wait_for_function("window.__ear.soundAt !== null", timeout=90_000)  # heard: the session opened
    assert page.inner_text("#status") == ""
    assert page.locator("#voice option").count() > 1, page.inner_text("#voice-note")  # fetched with the header
    assert not [u for u in opened.requested if KEY in u.split("#", 1)[0]], opened.requested
