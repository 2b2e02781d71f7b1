"""`GET /voices` on the agent: its speech server's voice list, for the agent page.

The page may only talk to the agent's host, so the agent fetches the list from the speech
server it uses (`GET /voices`, `{"voices":[{"name","language","gender"}]}`). When that
server cannot say (unreachable, no such route, a SageMaker endpoint), the answer is a 502
with `speech_unavailable`, and the page offers the default voice.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit, urlunsplit

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from voicestream.protocol import ErrorCode, ErrorFrame

logger = logging.getLogger(__name__)

VOICES_TIMEOUT_S = 5.0
_HTTP_SCHEMES = {"ws": "http", "wss": "https", "http": "http", "https": "https"}


def voices_url(speech_url: str) -> str | None:
    """The speech server's `GET /voices` URL for its session URL; None for SageMaker."""
    parts = urlsplit(speech_url)
    scheme = _HTTP_SCHEMES.get(parts.scheme)
    if scheme is None or not parts.netloc:
        return None
    return urlunsplit((scheme, parts.netloc, "/voices", "", ""))


def voices_route(speech_url: str, api_key: str | None = None) -> Route:
    """The route; `api_key` is the speech server's key, sent as a Bearer header."""
    url = voices_url(speech_url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def list_voices(_request: Request) -> Response:
        if url is None:
            return _unavailable(f"{speech_url} has no voice list to fetch")
        try:
            async with httpx.AsyncClient(timeout=VOICES_TIMEOUT_S) as client:
                reply = await client.get(url, headers=headers)
            reply.raise_for_status()
            voices = reply.json()["voices"]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as error:
            logger.warning("the speech server's voice list is unavailable: %r", error)
            return _unavailable(f"the speech server did not list its voices ({url})")
        return JSONResponse({"voices": voices})

    return Route("/voices", list_voices, methods=["GET"])


def _unavailable(message: str) -> Response:
    frame = ErrorFrame(code=ErrorCode.SPEECH_UNAVAILABLE, message=message)
    return Response(frame.to_http_json(), 502, media_type="application/json")
