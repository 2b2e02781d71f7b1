"""A cap on HTTP request bodies, applied before the AgentCore framework reads them.

`BedrockAgentCoreApp` reads `POST /invocations` whole (`await request.json()`), however
large: without a cap, one request could hold gigabytes. `BodyLimit` reads the body itself,
no further than its limit, and answers 413 `payload_too_large` (the JSON error shape of the
other HTTP errors) to a body that declares more or streams more; a body within the limit is
handed to the app as it came.
"""

from __future__ import annotations

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from voicestream.protocol import ErrorCode, ErrorFrame


class BodyLimit:
    """Refuses HTTP bodies over `max_bytes` before the app reads any of it (pure ASGI)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", ())).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        received: list[Message] = []
        size = 0
        while True:
            message = await receive()
            received.append(message)
            if message["type"] != "http.request":
                break  # the caller left; the app sees it as it would have
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return received.pop(0) if received else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        error = ErrorFrame(
            code=ErrorCode.PAYLOAD_TOO_LARGE.value,
            message=f"The request body is larger than {self.max_bytes} bytes.",
        )
        response = Response(
            error.to_http_json(), 413, media_type="application/json"
        )
        await response(scope, receive, send)
