"""Helpers of the client tests: a transport that records its traffic, a TCP hop that can be
cut, and text that arrives word by word the way a language model writes it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any, Self

from voicestream.client import ControlFrame, Frame, WebSocketTransport
from voicestream.server import free_port


class RecordingTransport(WebSocketTransport):
    """The real WebSocket transport, keeping every message it sent and frame it received,
    in order, so that tests can check what went over the wire and when."""

    def __init__(self, url: str, send_binary: bool = False) -> None:
        super().__init__(url, send_binary)
        self.log: list[tuple[str, Any]] = []

    async def send(self, message: Mapping[str, Any]) -> None:
        self.log.append(("sent", dict(message)))
        await super().send(message)

    async def receive(self) -> Frame | None:
        frame = await super().receive()
        self.log.append(("received", frame))
        return frame

    def sent_types(self) -> list[str]:
        return [message["type"] for direction, message in self.log if direction == "sent"]

    def control_frames(self) -> list[dict[str, Any]]:
        return [
            frame.message
            for direction, frame in self.log
            if direction == "received" and isinstance(frame, ControlFrame)
        ]


class CuttableProxy:
    """A TCP forwarder to the real server whose connections can be cut without a goodbye,
    the way a network failure or a crashed host ends them."""

    def __init__(self, target_url: str) -> None:
        host, port = target_url.removeprefix("http://").split(":")
        self._target = (host, int(port))
        self._writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None
        self.url = ""

    async def __aenter__(self) -> Self:
        port = free_port()
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", port)
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.cut()
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    def cut(self) -> None:
        for writer in self._writers:
            writer.transport.abort()

    async def _forward(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        server_reader, server_writer = await asyncio.open_connection(*self._target)
        self._writers += [client_writer, server_writer]
        await asyncio.gather(
            self._pipe(client_reader, server_writer), self._pipe(server_reader, client_writer)
        )

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.transport.abort()


class WordStream:
    """Text fed word by word with a delay, like a model's token stream; remembers when each
    word was handed out (`time.perf_counter()`).

    With `hold_at`, it stops before that word until `release` is set (within `hold_timeout_s`),
    so a test can prove that audio came while the text was still unfinished, whatever the
    machine's speed."""

    def __init__(self, text: str, delay_s: float, hold_at: int | None = None, hold_timeout_s: float = 120) -> None:
        self.words = text.split(" ")
        self.delay_s = delay_s
        self.fed_at: list[float] = []
        self.hold_at = hold_at
        self.hold_timeout_s = hold_timeout_s
        self.release = asyncio.Event()

    async def __aiter__(self) -> AsyncIterator[str]:
        for i, word in enumerate(self.words):
            if i == self.hold_at:
                async with asyncio.timeout(self.hold_timeout_s):
                    await self.release.wait()
            self.fed_at.append(time.perf_counter())
            yield word if i == len(self.words) - 1 else word + " "
            await asyncio.sleep(self.delay_s)

    def time_word_fed(self, word_index: int) -> float:
        return self.fed_at[word_index]
