"""One context runner for every socket face of the speech server: the session, Cartesia's
socket, ElevenLabs' two sockets, Deepgram's socket and Wyoming's connection.

A face is a **protocol machine without I/O** (:class:`FaceMachine`), as h11 is: it takes one
client message and returns :data:`Command` values (open a context, feed it text, flush it with
a marker, end it, cancel it, send a frame, finish the socket), and takes the core's
:data:`Event` values for a context (a piece of audio with its words, a marker reached, the
context ended or failed) and returns commands again, mostly frames to send. It keeps its own
protocol state and nothing else: no socket, no task, no timer, no budget.

:class:`ContextConnection` executes those commands against the core, for every such face
once: the per-socket limit on open contexts and the voice check at open, one task per
context iterating its :class:`~voicestream.speech.streamed.StreamedSpeech`, one error path
(a refusal is reported with the context's id, anything else logged once and reported as
``internal``), one bounded send path (a context waits while ``MAX_QUEUED_ANSWERS`` of its
frames wait for the socket; a frame of a context cancelled meanwhile is dropped when its turn
comes), word times re-based once (from the start of the context's audio) and the cancel
metric. A context the face cancelled reports nothing more: the face already knows; one
the core refuses to open (a full socket, an unknown voice) is refused to the client and
reported to the face as :class:`Refused`.

A face whose answers never interleave (the session, Wyoming) opens its contexts ``in_order``:
each is answered when its turn in the connection's outbox comes, after every frame and context
queued before it, by the sender itself (no task of its own; a failure's error frame takes its
place in that order). The face hears :class:`Turn` as that turn comes (its opening frame goes
then), and with ``sentences`` where each sentence's audio begins and ends (:class:`Sentence`).
A context may be one whole text (``Open.text``: checked and queued at open, so a refusal
answers the message that opened it); a cancel may be ``answered`` (the context keeps its place,
sends nothing more of its audio, and ends with ``Ended(completed=False)`` at its turn, for the
face to answer); a face that reads strictly one message at a time returns :class:`WaitSent`.
:class:`Ended` carries the context's totals (audio bytes and seconds, time to first audio),
and word offsets count in the whole text the context was fed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from voicestream.edge.connection import (
    PeerGone,
    PeerTransport,
    SendTimedOut,
    busy,
    serve_connection,
)
from voicestream.engine.alignment import TimedWord, offset_chars, offset_words
from voicestream.protocol import ErrorCode, SpeechFault
from voicestream.server.connection import SpeechConnection
from voicestream.speech.core import Output, SpeechCore, Voice
from voicestream.speech.job import Listener
from voicestream.speech.streamed import Spoken, StreamedSpeech
from voicestream.text import STREAMED, ChunkSchedule

log = logging.getLogger(__name__)

MAX_QUEUED_ANSWERS = 16
"""A context's frames waiting for the socket beyond which the context waits before sending more."""


# --- what a face says to the core ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Open:
    """Open ``context``: its text is read in ``voice`` and sent as ``output``; text the chunker
    cannot cut yet waits at most ``max_delay_s`` (None: until more text, a flush or the end)."""

    context: str
    voice: Voice
    output: Output
    max_delay_s: float | None
    request_id: str
    """The core's id of the context's requests (logs, metrics)."""
    answer_id: str | None
    """The id the face's error frames for this context carry."""
    in_order: bool = False
    """Answered after everything queued before it, by the sender (see the module's docstring)."""
    sentences: bool = False
    """The face hears :class:`Sentence` before and after each sentence's audio."""
    text: str | None = None
    """The context's whole text, one request checked and queued at open like any request of the
    core (a refusal answers the message): no :class:`Feed` or :class:`End` follows."""
    schedule: ChunkSchedule = STREAMED
    """How the chunker cuts the text fed (latency mode's short first chunk, or whole sentences)."""


@dataclass(frozen=True, slots=True)
class Feed:
    context: str
    text: str
    whole: bool = False
    """Speak ``text`` as one piece of its own, not cut into sentences (a whole-text request)."""


@dataclass(frozen=True, slots=True)
class Flush:
    """Speak what the context's chunker holds; ``mark`` (if any) comes back as :class:`Marked`
    once the audio of all text fed so far is sent."""

    context: str
    mark: object | None = None


@dataclass(frozen=True, slots=True)
class End:
    """No more text for ``context``: speak the rest; :class:`Ended` follows its audio."""

    context: str


@dataclass(frozen=True, slots=True)
class Cancel:
    """Drop ``context`` and everything of it not yet sent, at once; it reports nothing more,
    unless ``answered``: then it keeps its place (an ``in_order`` context its turn) and ends
    with ``Ended(completed=False)``, which the face answers."""

    context: str
    answered: bool = False


@dataclass(frozen=True, slots=True)
class Send:
    """Send ``frame``: after everything queued before it; from an event, in its context's order."""

    frame: Any


@dataclass(frozen=True, slots=True)
class Finish:
    """Read no more; close (1000) once everything queued so far is sent."""


@dataclass(frozen=True, slots=True)
class WaitSent:
    """Read the next client message only once everything queued so far is sent (a face that
    takes one message at a time); only in answer to a client message."""


Command = Open | Feed | Flush | End | Cancel | Send | Finish | WaitSent


# --- what the core tells a face --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Audio:
    """A piece of ``context``'s audio: it starts ``start_s`` into the context's audio and lasts
    ``seconds``; ``words`` are timed from the start of the context's audio (empty unless the
    context's output asked for word times); ``elapsed_s`` since its sentence began sending."""

    context: str
    data: bytes
    start_s: float
    seconds: float
    words: tuple[TimedWord, ...] = ()
    elapsed_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Marked:
    """The audio of the text fed before ``Flush(mark=mark)`` is sent."""

    context: str
    mark: object


@dataclass(frozen=True, slots=True)
class Ended:
    """``context``'s audio is all sent (``completed``), or it failed (after :class:`Failed`) or
    was cancelled (an ``answered`` :class:`Cancel`). Its totals: ``audio_bytes`` sent,
    ``audio_s`` of audio rendered, ``elapsed_s`` since it opened, and when its first audio was
    ready (``first_audio_s`` since it opened; None if it had none)."""

    context: str
    completed: bool
    audio_bytes: int = 0
    audio_s: float = 0.0
    elapsed_s: float = 0.0
    first_audio_s: float | None = None


@dataclass(frozen=True, slots=True)
class Failed:
    """``context`` failed; its error frame (``fault``, with the context's ``answer_id``) is
    already on its way."""

    context: str
    fault: SpeechFault


@dataclass(frozen=True, slots=True)
class Refused:
    """The core refused to open ``context`` (a full socket, an unknown voice): the client is
    answered with the error, and the context never began."""

    context: str


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence's audio of ``context`` begins, or (``ended``) is all sent; only for a context
    opened with ``sentences``."""

    context: str
    ended: bool


@dataclass(frozen=True, slots=True)
class Turn:
    """An ``in_order`` context's turn in the outbox came: what the face sends first goes now."""

    context: str


Event = Audio | Marked | Ended | Failed | Refused | Sentence | Turn


class FaceMachine(Protocol):
    """A face's protocol state, without I/O (see the module's docstring)."""

    kind: ClassVar[str]
    """What the log calls its connections ("Cartesia socket")."""
    route: ClassVar[str]
    """The metrics' route label."""
    unit: ClassVar[str]
    """What its contexts are to its clients ("context", "request"): an internal failure's message names it."""

    def start(self) -> list[Command]:
        """What the face does as the connection opens."""
        ...

    def receive(self, message: str | bytes) -> list[Command]:
        """One client message; a :class:`SpeechFault` (with its ``request_id``) answers it."""
        ...

    def event(self, event: Event) -> list[Command]:
        """One event of an open context (never of one the face cancelled)."""
        ...

    def fault_frame(self, fault: SpeechFault) -> Any:
        """The face's error frame."""
        ...


def place(words: Sequence[TimedWord], text_start: int, audio_start_s: float) -> tuple[TimedWord, ...]:
    """A sentence's words, timed from its audio's start and placed in its own text, as the
    context's: ``text_start`` characters into the text the context was fed, ``audio_start_s``
    into its audio (the one re-basing of word times between the core and a face)."""
    return tuple(offset_words(offset_chars(words, text_start), audio_start_s))


# --- the runner ------------------------------------------------------------------------------


@dataclass(eq=False)
class _Context:
    id: str
    answer_id: str | None
    speech: StreamedSpeech
    in_order: bool = False
    sentences: bool = False
    audio_s: float = 0.0
    """Audio of this context sent so far."""
    audio_bytes: int = 0
    opened: float = field(default_factory=time.monotonic)
    first_audio_s: float | None = None
    """When its first audio was ready, since it opened."""
    dropped: bool = False
    """The face cancelled it: it reports nothing more, and its frames still waiting are not sent."""
    task: asyncio.Task[None] = field(init=False)


class ContextConnection(SpeechConnection):
    """A connection whose face is a :class:`FaceMachine` of contexts; see the module's docstring."""

    def __init__(self, transport: PeerTransport, service: SpeechCore, listener: Listener, machine: FaceMachine) -> None:
        super().__init__(transport, service, listener)
        self.machine = machine
        self.kind = machine.kind
        self.contexts: dict[str, _Context] = {}
        """Open contexts by id (until their audio is sent, they fail, or the face cancels them)."""
        self._live: set[_Context] = set()
        """Contexts whose task still runs (cancelled ones finishing included)."""
        self._execute(machine.start(), None)

    @classmethod
    async def serve_face(cls, transport: PeerTransport, service: SpeechCore | None, machine: FaceMachine) -> None:
        """`Connection.serve` for a face machine (the machine holds the URL's options)."""
        await serve_connection(
            transport, service, lambda listener: cls(transport, service, listener, machine), machine.fault_frame,
        )

    def fault_frame(self, fault: SpeechFault) -> Any:  # type: ignore[override]
        return self.machine.fault_frame(fault)

    @property
    def has_unsent(self) -> bool:
        return any(context.speech.has_unsent for context in self.contexts.values())

    async def handle(self, message: str | bytes) -> None:
        commands = self.machine.receive(message)
        self._execute(commands, None)
        self.accepted()
        if any(isinstance(command, WaitSent) for command in commands):
            await self.wait_all_sent()

    async def answer(self, context: _Context) -> None:
        """An ``in_order`` context, when its turn in the outbox comes."""
        await self._tell(context, Turn(context.id))
        await self._run(context)

    def finish(self) -> None:
        """Close once everything is sent: ``in_order`` contexts still taking text end with what
        they have (the sender reaches the close only after them)."""
        for context in self.contexts.values():
            if context.in_order:
                context.speech.end()
        super().finish()

    async def release(self) -> None:
        for waiting in self.contexts.values():  # in_order ones have no task of their own
            waiting.speech.cancel()
        contexts = list(self._live)
        self.contexts.clear()
        for context in contexts:
            context.speech.cancel()
            context.task.cancel()
        await asyncio.gather(*(context.task for context in contexts), return_exceptions=True)

    # --- commands ----------------------------------------------------------------------------

    def _execute(self, commands: Sequence[Command], source: _Context | None) -> list[Any]:
        """Carry out ``commands``; frames to send from a context's event are returned with any
        :class:`Finish` after them (the context's task sends them in its order), others are
        queued at once."""
        frames: list[Any] = []
        for command in commands:
            match command:
                case Open():
                    self._open(command)
                case Feed(context, text, whole):
                    speech = self._context(context).speech
                    if whole:
                        speech.say(text)
                    else:
                        speech.feed(text)
                case Flush(context, mark):
                    speech = self._context(context).speech
                    speech.flush()
                    if mark is not None:
                        speech.mark(mark)
                case End(context):
                    self._context(context).speech.end()
                case Cancel(context, answered):
                    self._cancel(context, answered)
                case Send(frame) if source is not None:
                    frames.append(frame)
                case Send(frame):
                    self.queue(frame)
                case Finish() if source is not None:
                    frames.append(command)  # after the frames before it
                case Finish():
                    self.finish()
                case WaitSent():
                    pass  # `handle` waits, once the message's commands are all carried out
        return frames

    def _context(self, context_id: str) -> _Context:
        context = self.contexts.get(context_id)
        if context is None:  # a face that lost track of its own contexts
            raise SpeechFault(ErrorCode.INTERNAL, f"no open context {context_id!r}", context_id)
        return context

    def _open(self, command: Open) -> None:
        limit = self.service.settings.max_session_requests
        voice = command.voice
        try:
            if len(self.contexts) >= limit:
                raise busy(f"This socket already has {limit} open contexts; end one first.")
            if command.text is None:  # a whole text is checked with its text, as it is queued
                self.service.check_voice(voice.voice, voice.speed, voice.language)
            speech = StreamedSpeech(
                self.service, voice, command.output, self.listener, self.machine.route, command.request_id,
                command.schedule, command.max_delay_s,
            )
            if command.text is not None:
                speech.say(command.text)
                speech.end()
                if speech.failure is not None:
                    raise speech.failure
        except SpeechFault as fault:  # the face hears that the context ended before it began
            fault.request_id = command.answer_id
            self._execute(self.machine.event(Refused(command.context)), None)
            raise
        context = _Context(command.context, command.answer_id, speech, command.in_order, command.sentences)
        self.contexts[context.id] = context
        if context.in_order:
            self.queue_answer(context)
            return
        context.task = asyncio.create_task(self._run(context), name=f"{self.machine.route}-context-{command.context}")
        self._live.add(context)
        context.task.add_done_callback(lambda _: self._live.discard(context))

    def _cancel(self, context_id: str, answered: bool) -> None:
        context = self.contexts.get(context_id) if answered else self.contexts.pop(context_id, None)
        if context is None:
            return
        if not answered:
            context.dropped = True
            self.dropped()
        if context.speech.cancel():
            self.service.metrics.cancels.labels(route=self.machine.route).inc()

    # --- a context's task ----------------------------------------------------------------------

    async def _run(self, context: _Context) -> None:
        speech = context.speech
        try:
            if speech.failure is not None or not speech.cancelled:  # one cancelled before its turn sends nothing
                async for item in speech:
                    if isinstance(item, Spoken):
                        await self._send_sentence(context, item)
                    else:
                        await self._tell(context, Marked(context.id, item))
        except SpeechFault as refused:  # a failure was logged where it happened
            await self._fail(context, refused)
        except (SendTimedOut, PeerGone):  # an in_order context's send: the connection is ending
            raise
        except Exception:  # the context fails, the connection goes on
            log.exception("%s context failed", self.a_kind, extra={"request_id": speech.request_id})
            await self._fail(context, SpeechFault(ErrorCode.INTERNAL, f"Synthesis failed for this {self.machine.unit}."))
        else:
            if self._forget(context):
                await self._tell(context, self._ended(context, completed=not speech.cancelled))
        finally:
            self.host.changed()  # the connection may be idle now: the drain looks again

    async def _send_sentence(self, context: _Context, spoken: Spoken) -> None:
        stream = spoken.stream
        started, sentence_s = time.monotonic(), context.audio_s
        if context.sentences:
            await self._tell(context, Sentence(context.id, ended=False))
        async with contextlib.aclosing(stream.chunks()) as chunks:
            async for chunk in chunks:
                if context.speech.cancelled:
                    return
                # the core times a sentence's words from the sentence's start and places them in
                # the sentence's text: re-based once, here, in the context's audio and text
                words = place(chunk.words, spoken.start, sentence_s) if chunk.words else ()
                if context.first_audio_s is None and chunk.data and chunk.seconds:
                    context.first_audio_s = time.monotonic() - context.opened
                context.audio_bytes += len(chunk.data)
                if chunk.data or words:
                    await self._tell(context, Audio(
                        context.id, chunk.data, context.audio_s, chunk.seconds, words, time.monotonic() - started,
                    ))
                context.audio_s += chunk.seconds
        if stream.result is not None:  # the request's own count (a codec's piece may carry no bytes)
            context.audio_s = sentence_s + stream.result.total_duration_s
        if context.sentences and not context.speech.cancelled:
            await self._tell(context, Sentence(context.id, ended=True))

    async def _fail(self, context: _Context, fault: SpeechFault) -> None:
        context.speech.cancel()
        if not self._forget(context):
            return
        fault.request_id = context.answer_id
        if context.in_order:
            await self.send_fault(fault)
        else:
            self.report(fault)
        await self._tell(context, Failed(context.id, fault), self._ended(context, completed=False))

    @staticmethod
    def _ended(context: _Context, completed: bool) -> Ended:
        return Ended(context.id, completed, context.audio_bytes, context.audio_s,
                     time.monotonic() - context.opened, context.first_audio_s)

    def _forget(self, context: _Context) -> bool:
        """Drop a context whose task ends; False if the face cancelled it (it hears nothing more;
        a context the connection cancels ends with its task, before this)."""
        if self.contexts.get(context.id) is context:
            del self.contexts[context.id]
        return not context.dropped

    async def _tell(self, context: _Context, *events: Event) -> None:
        """Hand ``events`` to the face and send the frames it answers, in the context's order;
        wait while the socket is behind (until the send timeout closes a peer that does not read).
        The face hears them all before the first frame is sent: what it holds never lags what
        the runner holds across a wait."""
        frames = [frame for event in events for frame in self._execute(self.machine.event(event), context)]
        for frame in frames:
            if isinstance(frame, Finish):
                self.finish()
            elif not context.in_order:
                await self.emit(frame, context, MAX_QUEUED_ANSWERS)
            elif not context.dropped:
                await self.send_within(frame)

