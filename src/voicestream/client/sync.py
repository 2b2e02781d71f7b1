"""`SpeechSession` for scripts that are not async: the sync shell of the same session.

The session's logic is `SessionProtocol`'s (no I/O) and its I/O the asyncio shell's, whose
transports are asynchronous (SageMaker's SDK has no other kind); this shell runs that
session on an event loop of its own, in a background thread, and each call waits for its
result there. Its methods and `connect` take the same parameters as `SpeechSession`'s
(`tests/client/test_client_parity.py` holds them equal), plus `call_timeout`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine, Iterable, Iterator
from typing import Any, Self

from voicestream.client.errors import SpeechTimeoutError
from voicestream.client.events import SpeechEvent
from voicestream.client.resume import ResumePolicy
from voicestream.client.session import (
    MAX_UNREAD_AUDIO,
    RESPONSE_TIMEOUT_S,
    RequestState,
    SessionState,
    SpeechSession,
)
from voicestream.client.session_protocol import SessionOptions
from voicestream.client.transport import Transport
from voicestream.protocol import DEFAULT_SAMPLE_RATE, DEFAULT_VOICE, AudioFormat

_EXHAUSTED = object()
CALL_TIMEOUT_S = 600.0
"""The longest any one call may wait for the session's thread (a long text still speaking)."""
CONNECT_TIMEOUT_S = 30.0


async def _pull(fragments: Iterable[str]) -> AsyncIterator[str]:
    """The fragments of a synchronous source, each fetched in a worker thread, so that a
    source that blocks (a model writing its answer) never stalls the session's loop."""
    iterator = iter(fragments)
    while (fragment := await asyncio.to_thread(next, iterator, _EXHAUSTED)) is not _EXHAUSTED:
        yield fragment


async def _pending_of(session: SpeechSession) -> dict[str, RequestState]:
    return session.pending


async def _next_or_none(events: AsyncIterator[SpeechEvent]) -> SpeechEvent | None:
    return await anext(events, None)


class SyncSpeechSession:
    """The synchronous twin of `SpeechSession`, with the same methods and events.

    `with SyncSpeechSession.connect(url) as session: for event in session.speak(...): ...`
    """

    def __init__(
        self, session: SpeechSession, loop: asyncio.AbstractEventLoop, thread: threading.Thread,
        call_timeout: float = CALL_TIMEOUT_S,
    ) -> None:
        self._session = session
        self._loop = loop
        self._thread = thread
        self.call_timeout = call_timeout
        """How long one call (`close`, the next event, ...) may wait before `SpeechTimeoutError`."""

    @classmethod
    def connect(
        cls,
        transport: Transport | str,
        *,
        voice: str = DEFAULT_VOICE,
        speed: float = 1.0,
        format: AudioFormat = "pcm16",
        sample_rate: int = DEFAULT_SAMPLE_RATE,
        close_timeout: float = 10.0,
        lang: str | None = None,
        response_timeout: float = RESPONSE_TIMEOUT_S,
        max_unread_audio: int = MAX_UNREAD_AUDIO,
        resume: ResumePolicy | None = None,
        api_key: str | None = None,
        word_timestamps: bool = False,
        call_timeout: float = CALL_TIMEOUT_S,
    ) -> SyncSpeechSession:
        """Start the session's thread and connect, as `SpeechSession.connect` does;
        `call_timeout` bounds how long any one call waits for the session's thread."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="speech-session", daemon=True)
        thread.start()
        connecting = SpeechSession.connect(
            transport,
            voice=voice,
            speed=speed,
            format=format,
            sample_rate=sample_rate,
            close_timeout=close_timeout,
            lang=lang,
            response_timeout=response_timeout,
            max_unread_audio=max_unread_audio,
            resume=resume,
            api_key=api_key,
            word_timestamps=word_timestamps,
        )
        try:
            session = asyncio.run_coroutine_threadsafe(connecting, loop).result(close_timeout + CONNECT_TIMEOUT_S)
        except BaseException:
            _stop(loop, thread)
            raise
        return cls(session, loop, thread, call_timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        try:
            self._run(self._session.__aexit__(exc_type, *exc_info))
        finally:
            _stop(self._loop, self._thread)

    @property
    def options(self) -> SessionOptions:
        return self._session.options

    @property
    def state(self) -> SessionState:
        return self._session.state

    @property
    def pending(self) -> dict[str, RequestState]:
        """As `SpeechSession.pending`, read on the session's own thread."""
        return self._run(_pending_of(self._session))

    def submit(
        self,
        text: str,
        request_id: str | None = None,
        *,
        voice: str | None = None,
        speed: float | None = None,
    ) -> str:
        return self._run(self._session.submit(text, request_id, voice=voice, speed=speed))

    def submit_piece(
        self,
        text: str,
        request_id: str | None = None,
        *,
        more: bool = True,
        chunking: str = "latency",
        voice: str | None = None,
        speed: float | None = None,
    ) -> str:
        return self._run(self._session.submit_piece(
            text, request_id, more=more, chunking=chunking, voice=voice, speed=speed
        ))

    def cancel(self, request_id: str | None = None) -> None:
        self._run(self._session.cancel(request_id))

    def events(self) -> Iterator[SpeechEvent]:
        return self._iterate(self._session.events())

    def speak(self, text_fragments: Iterable[str]) -> Iterator[SpeechEvent]:
        return self._iterate(self._session.speak(_pull(text_fragments)))

    def close(self) -> None:
        """Close the session (after every pending request, as `SpeechSession.close`) and
        stop its thread."""
        try:
            self._run(self._session.close())
        finally:
            _stop(self._loop, self._thread)

    def _run[T](self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run on the session's thread, within ``call_timeout`` (`SpeechTimeoutError` after)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(self.call_timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise SpeechTimeoutError(f"the session did not answer within {self.call_timeout:g} s") from None

    def _iterate(self, events: AsyncGenerator[SpeechEvent, None]) -> Iterator[SpeechEvent]:
        try:
            while (event := self._run(_next_or_none(events))) is not None:
                yield event
        finally:
            if self._loop.is_running():
                self._run(events.aclose())


def _stop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    if loop.is_running():
        loop.call_soon_threadsafe(loop.stop)
        thread.join(CONNECT_TIMEOUT_S)
    if not loop.is_closed():
        loop.close()
