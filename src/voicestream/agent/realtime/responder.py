"""One Realtime response: the agent's answer (`runtime.run`: LLM stream, latency-mode chunks,
one speech session; or, text only, `runtime.write`: the LLM stream alone) as the Realtime
API's response events.

Audio goes out as it comes (in the session's output format); the transcript follows it, a
word at a time once that word's audio has gone out (the speech server's word times), the
rest of a sentence when its audio ends. A cancel (`response.cancel`, a barge-in,
`output_audio_buffer.clear`) mutes the response at once: nothing of it is queued after that,
and what was queued and not yet sent is dropped; then its task is cancelled, which closes
the answer (the LLM stops, the speech server cancels the render). The listener keeps what
they heard: the client's `conversation.item.truncate`, or until then the server's estimate
(the audio sent, at most the real time since its first byte went out).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from strands.types.content import Messages

from voicestream.agent.conversation import BYTES_PER_SECOND, Turn, heard_text
from voicestream.agent.realtime.codecs import OutputEncoder
from voicestream.agent.runtime import AnswerLimits, run, write
from voicestream.protocol import AgentRequest
from voicestream.protocol.realtime import (
    AudioFormat,
    ContentPart,
    ContentPartAdded,
    ContentPartDone,
    Item,
    ItemAdded,
    ItemDone,
    OutputAudioDelta,
    OutputAudioDone,
    OutputItemAdded,
    OutputItemDone,
    OutputTextDelta,
    OutputTextDone,
    ResponseCreated,
    ResponseDone,
    ResponseStatus,
    ServerEvent,
    TranscriptDelta,
    TranscriptDone,
    new_id,
    response_object,
)
from voicestream.text import ChunkSchedule

logger = logging.getLogger(__name__)

Send = Callable[[ServerEvent, "str | None"], Awaitable[None]]
"""Queue one server event; the second argument tags a response's deltas (droppable)."""
MAX_HELD_EVENTS = 256
"""A held response's events waiting for its turn to end; past them its answer waits."""


class Held:
    """A speculative response's sends (`Send`), held until its turn ends (`release`: the
    events announcing it, then those held, in order, then the rest as they come) or dropped
    unheard (`drop`). One task produces them, so order holds."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._held: list[tuple[ServerEvent, str | None]] = []
        self.state = "held"
        self._changed = asyncio.Event()

    async def __call__(self, event: ServerEvent, tag: str | None) -> None:
        while self.state == "held" and len(self._held) >= MAX_HELD_EVENTS:
            self._changed.clear()
            await self._changed.wait()
        if self.state == "held":
            self._held.append((event, tag))
        elif self.state == "released":
            await self._send(event, tag)

    async def release(self, first: list[ServerEvent]) -> None:
        for event in first:
            await self._send(event, None)
        while self._held:  # what comes meanwhile joins the end
            event, tag = self._held.pop(0)
            await self._send(event, tag)
        self.state = "released"
        self._changed.set()

    def drop(self) -> None:
        self.state = "dropped"
        self._held.clear()
        self._changed.set()


class Instructed:
    """The LLM with the session's (or the response's) instructions after the agent's own
    system prompt, which keeps answers speakable; `stream_text` calls only `stream`."""

    def __init__(self, model: Any, instructions: str) -> None:
        self.model = model
        self.instructions = instructions

    def stream(self, messages: Messages, system_prompt: str | None = None, **kwargs: Any) -> Any:
        prompt = "\n\n".join(p for p in (system_prompt, self.instructions) if p)
        return self.model.stream(messages, system_prompt=prompt or None, **kwargs)


class Scripted:
    """A model that writes `text` and nothing else, whatever it is asked (a phone call's
    greeting, spoken through the same answer path as the LLM's)."""

    def __init__(self, text: str) -> None:
        self.text = text

    async def stream(self, messages: Messages, system_prompt: str | None = None, **kwargs: Any) -> Any:
        yield {"contentBlockDelta": {"delta": {"text": self.text}}}


@dataclass(frozen=True, slots=True)
class AnswerSetup:
    """What one response needs from the agent: its LLM, speech server and limits."""

    llm: Any
    speech_url: str
    speech_api_key: str | None
    schedule: ChunkSchedule
    limits: AnswerLimits


class _Transcript:
    """The answer's transcript, released as its audio goes out: the words of the answer's
    spoken pieces (the `Turn` the runtime fills, with the speech server's word times) whose
    audio has been sent."""

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.released = ""

    def advance(self, sent_s: float) -> str:
        """`sent_s` seconds of audio have gone out: the text this releases."""
        return self._release(heard_text(self.turn.pieces, sent_s))

    def rest(self) -> str:
        """The answer is complete: the text not yet released."""
        return self._release(self.full())

    def full(self) -> str:
        return " ".join(piece.text.strip() for piece in self.turn.pieces if piece.text.strip())

    def _release(self, text: str) -> str:
        if len(text) <= len(self.released) or not text.startswith(self.released):
            return ""
        delta, self.released = text[len(self.released) :], text
        return delta


class Response:
    """One response, from `response.created` to `response.done`."""

    def __init__(
        self,
        setup: AnswerSetup,
        send: Send,
        *,
        voice: str,
        kokoro_voice: str,
        speed: float,
        output_format: AudioFormat,
        instructions: str,
        messages: Messages,
        turn: Turn,
        on_end: Callable[[Response], None],
        metadata: dict[str, str] | None = None,
        modalities: list[str] | None = None,
        held: bool = False,
    ) -> None:
        self.id = turn.request_id
        self.modalities = modalities or ["audio"]
        self.speaks = "audio" in self.modalities
        """Audio with its transcript; else text only: no speech server is asked."""
        self.item = Item(
            id=new_id("item"), role="assistant", status="in_progress", content=[self._content("")]
        )
        self.setup = setup
        self.held = Held(send) if held else None
        """A speculative response's gate: nothing of it is sent until its turn ends."""
        self._send: Send = self.held or send
        self.voice, self.kokoro_voice, self.speed = voice, kokoro_voice, speed
        self.output_format = output_format
        self.instructions = instructions
        self.messages = messages
        self.turn = turn
        self._on_end = on_end
        self.metadata = metadata
        """The client's own labels (`response.create`), returned in the response object."""
        self._encoder = OutputEncoder(output_format.type)
        self._transcript = _Transcript(turn)
        self.audio_s = 0.0
        self.first_audio_at: float | None = None
        self.muted = False
        self.done = False
        self.task: asyncio.Task[None] | None = None

    @property
    def heard_estimate_ms(self) -> int:
        """What the listener can have heard by now: the audio sent, at most the real time
        since its first byte left."""
        if self.first_audio_at is None:
            return 0
        return int(min(self.audio_s, time.monotonic() - self.first_audio_at) * 1000)

    async def start(self, previous_item_id: str | None) -> None:
        for event in self._announcement(previous_item_id):
            await self._send(event, None)
        self.begin()

    def begin(self) -> None:
        """Start the answer (a held response: before anything of it is sent)."""
        self.task = asyncio.create_task(self._drive(), name=f"realtime-{self.id}")
        self.task.add_done_callback(self._ended)

    async def release(self, previous_item_id: str | None) -> None:
        """A held response's turn ended: announce it, send what it held, go on live. What
        the listener hears begins now."""
        assert self.held is not None
        if self.first_audio_at is not None:
            self.first_audio_at = time.monotonic()
        await self.held.release(self._announcement(previous_item_id))

    def drop(self) -> None:
        """A held response's speaker went on: nothing of it is ever sent; then cancel it."""
        assert self.held is not None
        self.held.drop()

    def _announcement(self, previous_item_id: str | None) -> list[ServerEvent]:
        item = self.item.model_copy(update={"status": "in_progress", "content": [self._content("")]})
        return [
            ResponseCreated(response=self._object("in_progress")),
            OutputItemAdded(response_id=self.id, item=item.wire()),
            ItemAdded(item=item.wire(), previous_item_id=previous_item_id),
            ContentPartAdded(response_id=self.id, item_id=self.item.id, part=self._wire_part("")),
        ]

    def _ended(self, _task: asyncio.Task[None]) -> None:
        """However the task ended (even cancelled before it ran): the turn is final."""
        self.turn.finished.set()
        self._on_end(self)

    async def cancel(self, reason: str) -> None:
        """Mute now, end with `cancelled`, then stop the answer's task (in the background)."""
        if self.done:
            return
        self.muted = True
        if self.speaks:
            self.turn.heard_s = self.heard_estimate_ms / 1000
        await self._finish("cancelled", {"type": "cancelled", "reason": reason})
        if self.task is not None:
            self.task.cancel()

    async def stopped(self) -> None:
        """Wait for the answer's task to have closed its LLM stream and speech session."""
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(
                    asyncio.shield(self.task), self.setup.limits.speech_timeout_s
                )

    async def _drive(self) -> None:
        request = AgentRequest(
            prompt=self.turn.question or "continue", voice=self.kokoro_voice, speed=self.speed
        )
        llm = Instructed(self.setup.llm, self.instructions)
        failure: dict[str, Any] | None = None
        try:
            if self.speaks:
                answer = run(
                    request,
                    llm,
                    self.setup.speech_url,
                    speech_api_key=self.setup.speech_api_key,
                    request_id=self.id,
                    schedule=self.setup.schedule,
                    limits=self.setup.limits,
                    messages=self.messages,
                    turn=self.turn,
                )
            else:
                answer = write(
                    request,
                    llm,
                    request_id=self.id,
                    limits=self.setup.limits,
                    messages=self.messages,
                    turn=self.turn,
                )
            async with contextlib.aclosing(answer):
                async for event in answer:
                    if self.muted:
                        return  # cut: whoever muted it ends it (cancel, as cancelled)
                    if event["type"] == "error":
                        failure = {
                            "type": "failed",
                            "error": {
                                "type": "server_error",
                                "code": event["code"],
                                "message": event["message"],
                            },
                        }
                    else:
                        await self._translate(event)
            await self._finish("failed" if failure else "completed", failure)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("realtime response %s failed", self.id)
            await self._finish(
                "failed",
                {
                    "type": "failed",
                    "error": {
                        "type": "server_error",
                        "code": "internal",
                        "message": "the agent failed; see its log",
                    },
                },
            )

    async def _translate(self, event: dict[str, Any]) -> None:
        if event["type"] == "text_delta" and not self.speaks:
            await self._delta(OutputTextDelta(delta=event["text"], **self._part()))
        if event["type"] != "audio_chunk":
            return
        audio = self._encoder.encode(event["data"])
        await self._delta(OutputAudioDelta(delta=audio, **self._part()))
        if self.first_audio_at is None:
            self.first_audio_at = time.monotonic()
        self.audio_s += _decoded_length(event["data"]) / BYTES_PER_SECOND
        text = self._transcript.advance(self.audio_s)
        if text:
            await self._delta(TranscriptDelta(delta=text, **self._part()))

    async def _delta(self, event: ServerEvent) -> None:
        if not self.muted:
            await self._send(event, self.id)

    def _part(self) -> dict[str, Any]:
        return {"response_id": self.id, "item_id": self.item.id}

    async def _finish(self, status: ResponseStatus, details: dict[str, Any] | None) -> None:
        if self.done:
            return
        self.done = True
        if not self.speaks:
            text = self.turn.text
            await self._send(OutputTextDone(text=text, **self._part()), None)
        else:
            if status == "completed":
                rest = self._transcript.rest()
                if rest:
                    await self._send(TranscriptDelta(delta=rest, **self._part()), None)
            done = status == "completed"
            text = self._transcript.full() if done else self._transcript.released
            await self._send(OutputAudioDone(**self._part()), None)
            await self._send(TranscriptDone(transcript=text, **self._part()), None)
        self.item = self.item.model_copy(
            update={
                "status": "completed" if status == "completed" else "incomplete",
                "content": [self._content(text)],
            }
        )
        await self._send(ContentPartDone(part=self._wire_part(text), **self._part()), None)
        await self._send(OutputItemDone(response_id=self.id, item=self.item.wire()), None)
        await self._send(ItemDone(item=self.item.wire()), None)
        await self._send(ResponseDone(response=self._object(status, details)), None)

    def _object(
        self, status: ResponseStatus, details: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        output = [] if status == "in_progress" else [self.item.wire()]
        return response_object(
            self.id,
            status,
            output=output,
            modalities=self.modalities,
            voice=self.voice if self.speaks else None,
            output_format=self.output_format,
            details=details,
            metadata=self.metadata,
        )

    def _content(self, text: str) -> ContentPart:
        """The item's one content part, as the conversation holds it."""
        if self.speaks:
            return ContentPart(type="output_audio", transcript=text)
        return ContentPart(type="output_text", text=text)

    def _wire_part(self, text: str) -> dict[str, Any]:
        """The part as `response.content_part.added` / `.done` carry it."""
        return (
            {"type": "audio", "transcript": text} if self.speaks else {"type": "text", "text": text}
        )


def _decoded_length(data: str) -> int:
    """Bytes in base64 `data`, without decoding it."""
    return len(data) * 3 // 4 - data[-2:].count("=")
