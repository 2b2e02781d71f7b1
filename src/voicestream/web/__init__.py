"""The pages (the static files under `static/`) and the routes that serve them.

The speech server serves the playground and the agent serves its page with the same
helper; neither imports the other. The pages load nothing from another host: every script,
style and worklet is under `/web/`, served from this package.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).parent / "static"
AGENT_PAGE = "agent.html"
PLAYGROUND_PAGE = "playground.html"

_HEADERS = {"Cache-Control": "no-cache"}


def page_routes(page: str) -> list[BaseRoute]:
    """`GET /` answering `page` (one of the HTML files here), and `/web/` for its assets."""
    path = STATIC_DIR / page
    if not path.is_file():
        raise ValueError(f"no page {page!r} in {STATIC_DIR}")

    async def index(_request: Request) -> Response:
        return FileResponse(path, media_type="text/html; charset=utf-8", headers=_HEADERS)

    return [
        Route("/", index, methods=["GET"]),
        Mount("/web", StaticFiles(directory=STATIC_DIR), name="web"),
    ]
