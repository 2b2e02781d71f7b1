"""One utterance whose text arrives in pieces (a Cartesia context, a Wyoming stream).

An LLM's tokens go in through :meth:`StreamedSpeech.feed`; the text layer's incremental
chunker cuts them into chunks (sentences, or latency mode's short first piece); each chunk
becomes one request of the core (``SpeechCore.start``), queued at most ``AHEAD`` chunks
before its audio is due, so rendering overlaps sending without one context filling the
queue; the audio comes out in text order through iteration.

Text that the chunker cannot decide yet (a sentence without the next word, "Dr.") waits at
most ``max_delay_s`` after the message that left it unspoken, then is spoken as it is: the
bound Cartesia's ``max_buffer_delay_ms`` sets, and what keeps a stream that stalls mid-
sentence from staying silent.

Each chunk is sent to the engine as it was written (`Chunk.raw`: markup and line breaks
intact, the normalizer's to read), and `Spoken.start` says where it lies in the utterance's
text, so that word offsets can count in the text as the client sent it.

This is the "stream text into a request" verb the protocol adapters share; it uses only
the core's public API (``start``, ``stream``, ``max_text_chars``, ``SynthesisJob.cancel``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

from voicestream.protocol import ErrorCode
from voicestream.speech.core import AudioStream, Output, RequestRejected, SpeechCore, Voice
from voicestream.speech.job import Listener, SynthesisJob
from voicestream.text import STREAMED, ChunkSchedule, IncrementalSentenceChunker
from voicestream.text.markup import MarkupError, ends_inside_markup, unfinished_markup

AHEAD = 2
"""Chunks queued with the scheduler beyond the one being sent."""


def _visible(text: str) -> int:
    return len(text) - sum(char.isspace() for char in text)


@dataclass
class Spoken:
    """One chunk's text and its audio, in the order the text came."""

    text: str
    stream: AudioStream
    start: int = 0
    """Where ``text`` starts in the utterance's text as fed (a `say` text: in itself)."""


@dataclass
class _Chunk:
    text: str
    start: int = 0
    job: SynthesisJob | None = None
    whole: bool = False
    """A `say` text: one request of its own, queued under the utterance's own id."""


class StreamedSpeech:
    """Text in pieces in, audio out chunk by chunk; iterate it for :class:`Spoken` items and
    the markers put in with :meth:`mark`, in order. Iteration raises :class:`RequestRejected`
    if the core refuses a chunk (the rest is then dropped)."""

    def __init__(
        self, core: SpeechCore, voice: Voice, output: Output, listener: Listener, route: str,
        request_id: str, schedule: ChunkSchedule = STREAMED, max_delay_s: float | None = None,
    ) -> None:
        self.core = core
        self.voice = voice
        self.output = output
        self.route = route
        self.request_id = request_id
        self.max_delay_s = max_delay_s
        self._chunker = IncrementalSentenceChunker(schedule)
        self._listener = listener
        self._items: deque[_Chunk | object] = deque()
        self._current: SynthesisJob | None = None
        """The job whose audio is being handed out."""
        self._buffered = 0
        """Characters fed and not yet handed out as chunks, whitespace not counted (chunks keep
        every other character, so this is exact)."""
        self._timer: asyncio.TimerHandle | None = None
        self._changed = asyncio.Event()
        self._count = 0
        self.ended = False
        """No more text will come (``end`` or ``cancel``)."""
        self.cancelled = False
        self.failure: RequestRejected | None = None

    @property
    def has_unsent(self) -> bool:
        """Text or audio of it is still to send: a chunk being handed out or waiting, text short
        of a chunk that a delay will speak, or its end (until its consumer is done with it).
        Open with all else spoken and sent, it has none (text short of a chunk with no delay
        waits for its client): the connection holding it may go idle, or away while draining."""
        return (
            self._current is not None
            or any(isinstance(item, _Chunk) for item in self._items)
            or (self._buffered > 0 and self.max_delay_s is not None)
            or (self.ended and not self.cancelled)
        )

    @property
    def unspoken_chars(self) -> int:
        """Characters accepted and not yet queued with the scheduler."""
        return self._buffered + sum(len(item.text) for item in self._items if isinstance(item, _Chunk) and item.job is None)

    def feed(self, text: str) -> None:
        """Add text; complete chunks are queued at once, the rest waits for more text or the delay.

        More than the engine's ``max_text_chars`` waiting unspoken fails the utterance
        (``text_too_long``): a client must read audio before it sends more."""
        if self.ended:
            return
        chunks = self._chunker.feed_chunks(text)
        self._buffered += _visible(text) - sum(_visible(chunk.raw) for chunk in chunks)
        try:
            unfinished_markup(self._chunker.pending_text)
        except MarkupError as error:
            self._fail(RequestRejected(ErrorCode.INVALID_MARKUP, error.message))
            return
        for chunk in chunks:
            self._items.append(_Chunk(chunk.raw, chunk.start))
        if chunks and self._timer is not None:
            self._timer.cancel()
            self._timer = None
        limit = self.core.max_text_chars
        if self.unspoken_chars > limit:
            self._fail(RequestRejected(
                ErrorCode.TEXT_TOO_LONG,
                f"More than {limit} characters wait unspoken in this stream; read its audio before sending more.",
            ))
            return
        if self.max_delay_s == 0:
            self.flush()
        elif self._buffered and self._timer is None and self.max_delay_s is not None:
            self._timer = asyncio.get_running_loop().call_later(self.max_delay_s, self.flush)
        self._top_up()

    def say(self, text: str) -> None:
        """Add ``text`` as one chunk of its own, not cut (a whole-text request)."""
        if not self.ended:
            self._items.append(_Chunk(text, whole=True))
            self._top_up()

    def flush(self, ending: bool = False) -> None:
        """Speak what the chunker still holds, decided or not; unless ``ending``, not while it
        ends inside markup (a tag cut across messages): that waits for the rest of the tag."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not ending and ends_inside_markup(self._chunker.pending_text):
            return
        rest = self._chunker.flush_chunks()
        self._buffered = 0
        if rest and not self.ended:
            self._items += [_Chunk(chunk.raw, chunk.start) for chunk in rest]
            self._top_up()

    def mark(self, marker: object) -> None:
        """Put ``marker`` in the output after the audio of all text fed so far."""
        if not self.ended:
            self._items.append(marker)
            self._changed.set()

    def end(self) -> None:
        """No more text: speak the rest; iteration ends after its audio."""
        self.flush(ending=True)
        self.ended = True
        self._changed.set()

    def cancel(self) -> bool:
        """Drop everything not yet sent; returns whether the utterance was unfinished (more
        text could still come, or audio was left to render or send)."""
        current = self._current is not None and not self._current.finished
        had_work = not self.ended or current or any(isinstance(item, _Chunk) for item in self._items)
        self.ended = self.cancelled = True
        self.flush(ending=True)
        if self._current is not None:
            self._current.cancel()
        for item in self._items:
            if isinstance(item, _Chunk) and item.job is not None:
                item.job.cancel()
        self._items.clear()
        self._changed.set()
        return had_work

    def _fail(self, rejected: RequestRejected) -> None:
        self.cancel()
        self.failure = rejected

    def _top_up(self) -> None:
        """Queue the first ``AHEAD`` chunks not yet queued (the one being sent is out of ``_items``)."""
        self._changed.set()
        chunks = [item for item in self._items if isinstance(item, _Chunk)][:AHEAD]
        for chunk in chunks:
            if chunk.job is None and self.failure is None:
                self._start(chunk)

    def _start(self, chunk: _Chunk) -> None:
        self._count += 1
        request_id = self.request_id if chunk.whole else f"{self.request_id}:{self._count}"
        try:
            chunk.job = self.core.start(chunk.text, self.voice, self.output, self._listener, request_id, self.route)
        except RequestRejected as rejected:
            self._fail(rejected)

    async def __aiter__(self) -> AsyncIterator[Spoken | object]:
        while True:
            while not self._items and not self.ended:
                self._changed.clear()
                await self._changed.wait()
            if self.failure is not None:
                raise self.failure
            if not self._items:
                return
            item = self._items.popleft()
            if not isinstance(item, _Chunk):
                yield item
                continue
            if item.job is None:
                self._start(item)
                if item.job is None:
                    continue  # refused: the failure is raised above
            self._current = item.job
            self._top_up()
            stream = self.core.stream(item.job, self.route)
            try:
                yield Spoken(item.text, stream, item.start)
            finally:
                item.job.cancel()  # a no-op once its audio is all out
                self._current = None

