"""Clients for `POST /invocations`: one complete text in, its audio streamed back.

Two readings of the same answer: `stream` gives the raw audio body as it arrives (chunked
transfer); `stream_events` asks for Server-Sent Events and gives each audio piece decoded
from base64, then the `synthesis_complete` dict. The sync and the async client have the
same shape, as httpx's do; what they share (the request, reading events: the sans-I/O
`InvocationsEventReader`) is written once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, Self

import httpx

from voicestream.client.errors import (
    ConnectionLostError,
    ServerError,
    error_from_frame,
    error_from_http,
)
from voicestream.client.transport import bearer
from voicestream.protocol import (
    DEFAULT_SAMPLE_RATE,
    DEFAULT_VOICE,
    AudioEvent,
    AudioFormat,
    ErrorFrame,
    ProtocolError,
    SSEDecoder,
    SSEEvent,
    SynthesisComplete,
    load_json_object,
    parse_server_frame,
)

INVOCATIONS_PATH = "/invocations"
DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=10.0)
"""Generous for reading: a long text's last piece may take a while on a CPU server."""

_SERVER_FRAME_TYPES = frozenset(
    {"audio", "synthesis_start", "synthesis_complete", "synthesis_cancelled", "error"}
)

SSEItem = bytes | dict[str, Any]
"""What `stream_events` yields: audio, then the `synthesis_complete` dict last."""


def _body(
    text: str, voice: str, speed: float, format: AudioFormat, sample_rate: int
) -> dict[str, Any]:
    return {
        "text": text,
        "voice": voice,
        "speed": speed,
        "format": format,
        "sample_rate": sample_rate,
        "stream": True,
    }


class InvocationsEventReader:
    """The Server-Sent Events answer without I/O: bytes in, audio bytes and then the
    completion dict out; raises the answer's errors as `SpeechError`s."""

    def __init__(self) -> None:
        self._decoder = SSEDecoder()
        self.completed = False

    def feed(self, chunk: bytes) -> list[SSEItem]:
        return [
            item for event in self._decoder.feed(chunk) if (item := self._read(event)) is not None
        ]

    def finish(self) -> list[SSEItem]:
        """The events the end of the body completes; raises if it ended without completion."""
        items = [item for event in self._decoder.flush() if (item := self._read(event)) is not None]
        if not self.completed:
            raise ConnectionLostError("the answer ended before its synthesis_complete event")
        return items

    def _read(self, event: SSEEvent) -> SSEItem | None:
        try:
            message = load_json_object(event.data)
            if message.get("type") not in _SERVER_FRAME_TYPES:
                return None  # an event of a newer server
            frame = parse_server_frame(message)
            if isinstance(frame, AudioEvent):
                return frame.audio()
        except (ProtocolError, ValueError) as error:
            raise ServerError(
                f"the server sent a malformed event: {error}", code="invalid_frame"
            ) from None
        if isinstance(frame, ErrorFrame):
            raise error_from_frame(frame.code, frame.message, frame.request_id)
        if isinstance(frame, SynthesisComplete):
            self.completed = True
            return message
        return None  # synthesis_start and the like: nothing to hand out


class _InvocationsClientBase[H: (httpx.Client, httpx.AsyncClient)]:
    """What both shells share: the URL, the request and its headers."""

    _http_class: type[H]

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        http_client: H | None = None,
        api_key: str | None = None,
    ) -> None:
        self.url = httpx.URL(base_url.rstrip("/") + INVOCATIONS_PATH)
        self._auth = bearer(api_key)
        self._http: H = http_client or self._http_class(timeout=timeout)
        self._owns_http = http_client is None

    def _request(self, body: dict[str, Any], events: bool) -> dict[str, Any]:
        """The keyword arguments of `stream("POST", ...)` for `body`, asking for Server-Sent
        Events when `events`."""
        accept = {"Accept": "text/event-stream"} if events else {}
        return {"method": "POST", "url": self.url, "json": body, "headers": self._auth | accept}

    def _lost(self, error: httpx.TransportError) -> ConnectionLostError:
        return ConnectionLostError(f"POST {self.url} failed: {error!r}")


class InvocationsClient(_InvocationsClientBase[httpx.Client]):
    """`POST /invocations` of the speech server at `base_url`, synchronously.

    Pass `http_client` to share a configured `httpx.Client` (it is then left open on close);
    `api_key` is sent as `Authorization: Bearer KEY` when the server has one.
    """

    _http_class = httpx.Client

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def stream(
        self, text: str, voice: str = DEFAULT_VOICE, speed: float = 1.0,
        format: AudioFormat = "wav", sample_rate: int = DEFAULT_SAMPLE_RATE,
    ) -> Iterator[bytes]:
        """The audio body, chunk by chunk as the server sends it (a WAV header first for wav)."""
        for chunk in self._chunks(_body(text, voice, speed, format, sample_rate), events=False):
            if chunk:
                yield chunk

    def stream_events(
        self, text: str, voice: str = DEFAULT_VOICE, speed: float = 1.0,
        format: AudioFormat = "wav", sample_rate: int = DEFAULT_SAMPLE_RATE,
    ) -> Iterator[SSEItem]:
        """Each audio piece of the Server-Sent Events answer, decoded, then the completion dict."""
        reader = InvocationsEventReader()
        for chunk in self._chunks(_body(text, voice, speed, format, sample_rate), events=True):
            yield from reader.feed(chunk)
        yield from reader.finish()

    def _chunks(self, body: dict[str, Any], events: bool) -> Iterator[bytes]:
        try:
            with self._http.stream(**self._request(body, events)) as response:
                if response.is_error:
                    raise error_from_http(response.status_code, response.read())
                yield from response.iter_bytes()
        except httpx.TransportError as error:
            raise self._lost(error) from error


class AsyncInvocationsClient(_InvocationsClientBase[httpx.AsyncClient]):
    """`POST /invocations` of the speech server at `base_url`, for asyncio: the same methods
    as `InvocationsClient`, awaited (`http_client` an `httpx.AsyncClient`)."""

    _http_class = httpx.AsyncClient

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def stream(
        self, text: str, voice: str = DEFAULT_VOICE, speed: float = 1.0,
        format: AudioFormat = "wav", sample_rate: int = DEFAULT_SAMPLE_RATE,
    ) -> AsyncIterator[bytes]:
        """As `InvocationsClient.stream`."""
        async for chunk in self._chunks(_body(text, voice, speed, format, sample_rate), events=False):
            if chunk:
                yield chunk

    async def stream_events(
        self, text: str, voice: str = DEFAULT_VOICE, speed: float = 1.0,
        format: AudioFormat = "wav", sample_rate: int = DEFAULT_SAMPLE_RATE,
    ) -> AsyncIterator[SSEItem]:
        """As `InvocationsClient.stream_events`."""
        reader = InvocationsEventReader()
        async for chunk in self._chunks(_body(text, voice, speed, format, sample_rate), events=True):
            for item in reader.feed(chunk):
                yield item
        for item in reader.finish():
            yield item

    async def _chunks(self, body: dict[str, Any], events: bool) -> AsyncIterator[bytes]:
        try:
            async with self._http.stream(**self._request(body, events)) as response:
                if response.is_error:
                    raise error_from_http(response.status_code, await response.aread())
                async for chunk in response.aiter_bytes():
                    yield chunk
        except httpx.TransportError as error:
            raise self._lost(error) from error
