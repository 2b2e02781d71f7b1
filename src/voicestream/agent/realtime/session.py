"""One Realtime session's state and what each client event does to it.

The session holds its configuration (`session.update`), the input audio buffer with its turn
detection, the conversation, and at most one response at a time. Turn detection runs as
audio arrives; a turn that ends is committed as a user item, transcribed with the agent's
Whisper (in a thread, while the socket goes on reading), and answered when the session says
`create_response`. With `semantic_vad` each pause is judged before more audio is heard:
Smart Turn on the audio and Whisper's pass on the turn so far (`end_of_turn`) say whether
the turn ends there. With `interrupt_response`, speech that starts while an answer is being
sent cancels it, and an answer still playing at the client (by real time since its first
audio) is cut to what had been heard: the client's `conversation.item.truncate` corrects
both to the word.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from voicestream.agent.conversation import Turn
from voicestream.agent.realtime.codecs import InputDecoder
from voicestream.agent.realtime.conversation import RealtimeConversation
from voicestream.agent.realtime.end_of_turn import (
    SmartTurn,
    TextTurn,
    TurnModelUnavailable,
    Verdict,
    verdict,
    words_verdict,
)
from voicestream.agent.realtime.responder import AnswerSetup, Response, Scripted
from voicestream.agent.realtime.turns import InputAudio
from voicestream.agent.realtime.vad import (
    NoWords,
    Pause,
    Resumed,
    SpeechStart,
    SpeechStop,
    TurnEvent,
    VadUnavailable,
)
from voicestream.agent.service import AgentService
from voicestream.audio.pcm import FloatArray
from voicestream.protocol import ProtocolError
from voicestream.protocol.realtime import (
    BufferCleared,
    BufferCommitted,
    ClientEvent,
    ContentPart,
    ConversationItemCreate,
    ConversationItemDelete,
    ConversationItemTruncate,
    ErrorEvent,
    InputAudioBufferAppend,
    InputAudioBufferClear,
    InputAudioBufferCommit,
    InputTranscriptionCompleted,
    InputTranscriptionDelta,
    InputTranscriptionFailed,
    Item,
    ItemAdded,
    ItemDeleted,
    ItemDone,
    ItemTruncated,
    OutputAudioBufferClear,
    RealtimeError,
    ResponseCancel,
    ResponseCreate,
    SemanticVad,
    ServerEvent,
    SessionConfig,
    SessionCreated,
    SessionUpdate,
    SessionUpdated,
    SpeechStarted,
    SpeechStopped,
    new_id,
    parse_item,
    unsupported,
    updated_session,
)

logger = logging.getLogger(__name__)

MODEL_NAME = "voicestream"
"""What `session.model` says: the `?model=` a client sends is accepted and not used."""
MIN_COMMIT_MS = 100
"""A manual commit of less audio is refused, as OpenAI's server refuses it."""
TRANSCRIPTION_WAIT_S = 60.0
INTERIM_EVERY_MS = 1000
"""While the user speaks (with `audio.input.transcription` set), the turn so far is
transcribed again after this much more of it, one pass at a time."""
VERDICT_WAIT_S = 10.0
"""The longest a pause waits for its verdict (the socket reads nothing meanwhile); past it
the turn goes on, and ends at the eagerness's longest pause."""


@dataclass(slots=True, eq=False)
class Speculation:
    """A held answer to a pause judged finished (`RealtimeSession._speculate`)."""

    response: Response
    question: str
    """The question it answers: adopted only if the turn, ended, asks the same."""
    state: str = "held"
    """held, adopted (its turn ended: it is the response) or dropped (never heard)."""
    ended: bool = False
    """Its answer's task has ended (it may end before its turn does)."""


class RealtimeSession:
    def __init__(
        self,
        service: AgentService,
        send: Callable[[ServerEvent, str | None], Awaitable[None]],
        drop: Callable[[str], None],
        conversation_id: str | None,
    ) -> None:
        self.service = service
        self.id = new_id("sess")
        self.config = SessionConfig()
        self.conversation_id = conversation_id
        history = service.conversations.turns(conversation_id) if conversation_id else ()
        self.conversation = RealtimeConversation(history)
        self._send = send
        self._drop = drop
        self._end_of_turn: SmartTurn | None = None
        """Smart Turn, once a session asks for `semantic_vad`."""
        self._text_turn: TextTurn | None = None
        """The words' end-of-turn model with it, where it is installed."""
        try:
            self.audio = self._input_audio(0)
        except RealtimeError:  # no faster-whisper here (the slim image): manual turns
            self.config = updated_session(
                self.config, {"audio": {"input": {"turn_detection": None}}}
            )
            self.audio = self._input_audio(0)
        self.response: Response | None = None
        self.last_response: Response | None = None
        self.transcribing: asyncio.Task[str] | None = None
        self._speech_starts = 0
        self._commits = 0
        """Speech starts and turns committed so far: a turn whose speaker spoke again before
        its transcription was done, and is still speaking or has ended another turn since, is
        not answered on its own (`_owed`)."""
        self._owed = False
        self._speculation: Speculation | None = None
        """The answer to a pause judged finished, prepared unheard while the silence confirms
        the turn (`semantic_vad`): sent when the turn ends, dropped if the speaker goes on."""
        """A turn went unanswered because the speaker went on: the next turn's answer (or, if
        what followed was no words, one started then) answers it."""
        self._interim: asyncio.Task[None] | None = None
        self._interim_ms = 0
        """How much of the turn being spoken the last interim pass heard."""
        self._interim_text = ("", "")
        """(item id, text) the interim deltas have sent of the turn being spoken."""
        self._early: tuple[str, int, asyncio.Task[str]] | None = None
        """(item id, where its speech ended, the transcription): the turn so far, heard at a
        pause in case the pause ends it (`SpeechStop` at the same ms), so that its answer
        need not wait for Whisper after the silence duration."""
        self._background: set[asyncio.Task[Any]] = set()
        settings = service.settings
        self._setup = AnswerSetup(
            service.llm,
            settings.speech_url,
            settings.speech_api_key,
            settings.schedule,
            settings.limits,
        )

    @property
    def busy(self) -> bool:
        """A transcription (and the answer it may start) is under way."""
        return bool(self._background)

    async def send(self, event: ServerEvent) -> None:
        await self._send(event, None)

    async def open(self) -> None:
        await self.send(SessionCreated(session=self.config.wire(self.id, MODEL_NAME)))

    async def close(self) -> None:
        """Stop what runs: the response (its LLM and speech session), transcriptions."""
        self._drop_speculation()
        for task in self._background:
            task.cancel()
        if self.response is not None:
            self._drop(self.response.id)
            await self.response.cancel("client_cancelled")
            await self.response.stopped()

    async def handle(self, event: ClientEvent) -> None:
        match event:
            case SessionUpdate():
                await self._update(event)
            case InputAudioBufferAppend():
                await self._append(event)
            case InputAudioBufferCommit():
                if self.audio.held_ms < MIN_COMMIT_MS:
                    raise RealtimeError(
                        f"the input audio buffer holds {self.audio.held_ms} ms; at least "
                        f"{MIN_COMMIT_MS} ms are needed",
                        code="input_audio_buffer_commit_empty",
                        event_id=event.event_id,
                    )
                await self._commit(None, respond=False)
            case InputAudioBufferClear():
                self.audio.clear()
                await self.send(BufferCleared())
            case ConversationItemCreate():
                await self._create_item(event)
            case ConversationItemDelete():
                await self._delete(event)
            case ConversationItemTruncate():
                await self._truncate(event)
            case ResponseCreate():
                await self._respond(event)
            case ResponseCancel():
                active = self.response
                if active is None or (event.response_id and event.response_id != active.id):
                    raise RealtimeError(
                        "there is no active response to cancel",
                        code="response_cancel_not_active",
                        event_id=event.event_id,
                    )
                await self._cancel(active, "client_cancelled")
            case OutputAudioBufferClear():
                if self.response is not None:
                    await self._cancel(self.response, "client_cancelled")

    # --- session and input audio -------------------------------------------------------------

    def _input_audio(self, start_ms: int) -> InputAudio:
        audio = self.config.audio.input
        detection = audio.turn_detection
        if isinstance(detection, SemanticVad):
            try:
                self._end_of_turn = SmartTurn.load(self.service.settings.turn_model)
                self._text_turn = TextTurn.load_optional(self.service.settings.turn_text_model)
            except TurnModelUnavailable as error:
                logger.warning("semantic_vad is served by server_vad here: %s", error)
                detection = detection.as_server_vad()
                self.config = updated_session(
                    self.config, {"audio": {"input": {"turn_detection": detection.model_dump()}}}
                )
        try:
            return InputAudio(audio.format.type, detection, start_ms)
        except VadUnavailable as error:
            raise unsupported(
                f"server VAD here ({error})", "session.audio.input.turn_detection"
            ) from None

    async def _update(self, event: SessionUpdate) -> None:
        before = self.config
        self.config = updated_session(before, event.session, event.event_id)
        if (before.audio.input.format, before.audio.input.turn_detection) != (
            self.config.audio.input.format,
            self.config.audio.input.turn_detection,
        ):
            try:
                self.audio = self._input_audio(self.audio.ms)
            except RealtimeError:
                self.config = before
                raise
        await self.send(SessionUpdated(session=self.config.wire(self.id, MODEL_NAME)))

    async def _append(self, event: InputAudioBufferAppend) -> None:
        try:
            data = base64.b64decode(event.audio, validate=True)
        except (binascii.Error, ValueError):
            raise RealtimeError(
                "audio is not base64", param="audio", event_id=event.event_id
            ) from None
        await self.hear(self.audio.decoder.decode(data))

    async def hear(self, samples: FloatArray) -> None:
        """Audio at the analysis rate (16 kHz floats) from a face that decodes its own (a
        phone call), heard as `input_audio_buffer.append`'s."""
        await self._hear(self.audio.append_samples(samples))
        if self._early is not None and self._early[1] != self.audio.speech_end_ms:
            self._early[2].cancel()  # the speaker went on: this pause did not end the turn
            self._early = None
        self._transcribe_partly()

    async def _hear(self, turns: list[TurnEvent]) -> None:
        """Act on turn events in order; past each that the detector holds on (a pause to
        judge, the end of a turn to commit), hear the audio behind it."""
        while True:
            for turn in turns:
                await self._on_turn(turn)
            held = self.audio.holding
            if held is None:
                return
            judged = await self._judge(held.ms) if isinstance(held, Pause) else None
            turns = self.audio.go_on(judged)

    async def _on_turn(self, turn: TurnEvent) -> None:
        vad = self.config.audio.input.turn_detection
        if isinstance(turn, SpeechStart):
            self._speech_starts += 1
            interrupting = vad is not None and vad.interrupt_response
            if interrupting and self.response is not None:
                self.response.muted = True  # none of its audio follows speech_started
            # OpenAI's order, which pipecat and LiveKit stop playback on: speech_started,
            # then the interrupted answer's response.done (cancelled).
            await self.send(SpeechStarted(audio_start_ms=turn.ms, item_id=self.audio.item_id))
            if interrupting:
                await self._interrupt()
        elif isinstance(turn, SpeechStop):
            await self.send(SpeechStopped(audio_end_ms=turn.ms, item_id=self.audio.item_id))
            start_ms = max(0, turn.ms - self.audio.held_ms)
            respond = vad is not None and vad.create_response
            await self._commit(start_ms, respond, speech_end_ms=turn.ms)
        elif isinstance(turn, NoWords):  # noise: the speech stopped, and nothing was said
            await self.send(SpeechStopped(audio_end_ms=turn.ms, item_id=self.audio.item_id))
            self._early_transcript(self.audio.item_id, None)
            self.audio.clear()
            if self._owed and (self.transcribing is None or self.transcribing.done()):
                self._owed = False
                await self._answer()
        elif isinstance(turn, Pause):
            self._transcribe_early(turn.ms)
        elif isinstance(turn, Resumed):  # the pause judged finished was not the end
            self._drop_speculation()

    async def _judge(self, speech_end_ms: int) -> Verdict:
        """Is the turn, paused after speech that ended at `speech_end_ms`, finished? Smart
        Turn on the audio heard and the pause's Whisper pass (`_transcribe_early`), at once;
        then, where the rules leave the words open, the words' model on what Whisper heard. A
        turn judged finished has its answer started (`_speculate`): where the audio says
        finished, before the words' model runs, since the words can only make that verdict
        sure."""
        assert self._end_of_turn is not None  # loaded with the semantic VAD's buffer
        early = self._early[2] if self._early and self._early[1] == speech_end_ms else None
        text_probability = None
        transcript = None
        started = False
        try:
            async with asyncio.timeout(VERDICT_WAIT_S):
                probability = await self._end_of_turn.probability_async(self.audio.peek())
                if early is not None:
                    await asyncio.wait({early})  # not `await early`: its failure is not ours
                    if not early.cancelled() and early.exception() is None:
                        transcript = early.result()
                if transcript is not None and self._text_turn is not None and words_verdict(transcript, False) is None:
                    if verdict(probability, transcript, 0.0) is Verdict.FINISHED:  # the words can only make it sure
                        await self._speculate(speech_end_ms)
                        started = True
                    text_probability = await self._text_turn.probability_async(transcript)
        except TimeoutError:
            logger.warning("no verdict on a pause within %g s: the turn goes on", VERDICT_WAIT_S)
            self._drop_speculation()
            return Verdict.GOES_ON
        judged = verdict(probability, transcript, text_probability)
        logger.debug(
            "a pause at %d ms: Smart Turn %.2f, heard %r, words %s: %s",
            speech_end_ms, probability, transcript,
            "-" if text_probability is None else f"{text_probability:.2f}", judged.value,
        )
        if judged in (Verdict.FINISHED, Verdict.SURE) and not started:
            await self._speculate(speech_end_ms)
        return judged

    def _transcribe_early(self, speech_end_ms: int) -> None:
        """At a pause, hear the turn so far: if the silence goes on to end the turn, its
        transcript is ready (or nearly) when the turn is committed. The interim pass, if
        one runs, gives way (Whisper takes one transcription at a time)."""
        if self._early is not None:
            self._early[2].cancel()
        if self._interim is not None:
            self._interim.cancel()
        samples = self.audio.peek()
        task = self._spawn(self.service.recognizer.transcribe_async(samples))
        self._early = (self.audio.item_id, speech_end_ms, task)

    def _early_transcript(self, item_id: str, speech_end_ms: int | None) -> asyncio.Task[str] | None:
        """The early pass that heard exactly this turn, if any (consumed)."""
        early, self._early = self._early, None
        if early is None:
            return None
        if (early[0], early[1]) == (item_id, speech_end_ms):
            return early[2]
        early[2].cancel()
        return None

    def _transcribe_partly(self) -> None:
        """While the user speaks, transcribe the turn so far (one pass at a time, after each
        `INTERIM_EVERY_MS` more of it) and send what extends the text already sent as
        `input_audio_transcription.delta` (clients add the deltas up); the committed turn's
        own transcription (`.completed`) is the final word."""
        if not self.audio.speaking or self.config.audio.input.transcription is None:
            return
        if self._interim is not None and not self._interim.done():
            return
        item_id = self.audio.item_id
        if self._interim_text[0] != item_id:
            self._interim_text, self._interim_ms = (item_id, ""), 0
        if self.audio.held_ms - self._interim_ms < INTERIM_EVERY_MS:
            return
        self._interim_ms = self.audio.held_ms
        samples = self.audio.peek()

        async def interim() -> None:
            with contextlib.suppress(ProtocolError, TimeoutError):
                async with asyncio.timeout(TRANSCRIPTION_WAIT_S):
                    text = (await self.service.recognizer.transcribe_async(samples)).strip()
                sent = self._interim_text
                if sent[0] == item_id and text.startswith(sent[1]) and text != sent[1]:
                    self._interim_text = (item_id, text)
                    delta = text[len(sent[1]) :]
                    await self.send(InputTranscriptionDelta(item_id=item_id, delta=delta))

        self._interim = self._spawn(interim())

    async def _interrupt(self) -> None:
        """The listener speaks: cancel the answer being sent; an answer sent but still
        playing is cut to what has been heard by now (until a truncate says better)."""
        if self.response is not None:
            await self._cancel(self.response, "turn_detected")
        elif self.last_response is not None:
            last = self.last_response
            if last.turn.heard_s is None and last.heard_estimate_ms < last.audio_s * 1000:
                last.turn.heard_s = last.heard_estimate_ms / 1000

    async def _commit(
        self, start_ms: int | None, respond: bool, speech_end_ms: int | None = None
    ) -> None:
        if self._interim is not None:
            self._interim.cancel()  # the turn's own transcription follows: leave it the CPU
        item_id = self.audio.item_id
        early = self._early_transcript(item_id, speech_end_ms)
        samples = self.audio.take(start_ms)
        item = Item(id=item_id, role="user", content=[ContentPart(type="input_audio")])
        previous = self.conversation.add(item)
        self._commits += 1
        await self.send(BufferCommitted(item_id=item_id, previous_item_id=previous))
        await self.send(ItemAdded(item=item.wire(), previous_item_id=previous))
        self._transcribe(item, samples, respond, early)

    async def _answer(self) -> None:
        speculation, self._speculation = self._speculation, None
        if speculation is not None:
            if self.response is None and speculation.question == self.conversation.question():
                await self._adopt(speculation)
                return
            self._drop(speculation)
        try:
            await self._start_response(self.config.instructions)
        except RealtimeError as error:  # busy, or draining: said, not a failure
            await self.send(ErrorEvent.of(error))

    async def _speculate(self, speech_end_ms: int) -> None:
        """A pause judged finished: start its answer now, held unheard (`Response.held`),
        so that it is ready, or nearly, when the silence confirms the turn."""
        self._drop_speculation()
        vad = self.config.audio.input.turn_detection
        early = self._early[2] if self._early and self._early[1] == speech_end_ms else None
        if (
            not isinstance(vad, SemanticVad)
            or not vad.create_response
            or vad.confirm_ms == 0
            or self.response is not None
            or self.conversation_id  # a stored conversation's turn begins when it is asked
            or early is None
            or not early.done()
            or early.cancelled()
            or early.exception() is not None
            or not early.result().strip()
        ):
            return
        if not self.service.admit():
            return  # the agent is full: the turn's own answer will say so
        said = early.result()
        question = self.conversation.question(then=said)
        response = self._response(
            self.config.instructions,
            Turn(new_id("resp"), question),
            self.conversation.messages(then=said),
            on_end=lambda ended: self._speculation_ended(speculation),
            held=True,
        )
        speculation = Speculation(response, question)
        self._speculation = speculation
        response.begin()

    def _speculation_ended(self, speculation: Speculation) -> None:
        speculation.ended = True
        if speculation.state == "adopted":
            self._ended(speculation.response)
        elif speculation.state == "dropped":
            self.service.release()
            self.service.changed()

    async def _adopt(self, speculation: Speculation) -> None:
        """The turn the speculation answered ended: it becomes the response."""
        speculation.state = "adopted"
        response = speculation.response
        if not speculation.ended:
            self.response = response
        self.conversation.ask(response.turn)
        previous = self.conversation.add(response.item)
        entry = self.conversation.find(response.item.id)
        if entry is not None:
            entry.turn = response.turn
        await response.release(previous)
        if speculation.ended:
            self._ended(response)

    def _drop_speculation(self) -> None:
        speculation, self._speculation = self._speculation, None
        if speculation is not None:
            self._drop(speculation)

    def _drop(self, speculation: Speculation) -> None:
        """Nothing of it is heard, stored or counted as a response; its LLM and speech stop."""
        speculation.state = "dropped"
        speculation.response.drop()
        if speculation.ended:
            self.service.release()
            self.service.changed()
        else:
            self._spawn(speculation.response.cancel("turn_detected"))

    def _transcribe(
        self, item: Item, samples: Any, respond: bool, early: asyncio.Task[str] | None = None
    ) -> None:
        """Whisper hears the turn in a thread (or the pass that heard it at its last pause
        finishes: the same speech, less trailing silence, which Whisper's VAD filter drops);
        then the item is done, and answered if asked, unless the speaker spoke again
        meanwhile and the detector interrupts answers: that turn's answer is owed to the next
        (an answer to half a question, started after its speaker went on, would hold the
        conversation's one response and leave the whole question unanswered)."""
        starts, commits = self._speech_starts, self._commits

        async def heard() -> str:
            if early is not None:
                with contextlib.suppress(Exception):
                    return await early  # failed or abandoned: heard again below
            return await self.service.recognizer.transcribe_async(samples)

        async def transcribe() -> str:
            try:
                async with asyncio.timeout(TRANSCRIPTION_WAIT_S):
                    text = await heard()
            except (ProtocolError, TimeoutError) as error:
                message = getattr(error, "message", "the transcription took too long")
                await self.send(
                    InputTranscriptionFailed(
                        item_id=item.id,
                        error={
                            "type": "transcription_error",
                            "code": "asr_unavailable",
                            "message": message,
                        },
                    )
                )
                return ""
            entry = self.conversation.find(item.id)
            done = item.model_copy(
                update={"content": [ContentPart(type="input_audio", transcript=text)]}
            )
            if entry is not None:
                entry.item = done
            seconds = round(len(samples) / 16000, 3)
            await self.send(
                InputTranscriptionCompleted(
                    item_id=item.id, transcript=text, usage={"type": "duration", "seconds": seconds}
                )
            )
            await self.send(ItemDone(item=done.wire()))
            if respond and (text.strip() or self._owed):
                vad = self.config.audio.input.turn_detection
                went_on = self._speech_starts != starts and (self.audio.speaking or self._commits != commits)
                if went_on and vad is not None and vad.interrupt_response:
                    self._owed = True
                    self._drop_speculation()
                else:
                    self._owed = False
                    await self._answer()
            return text

        self.transcribing = self._spawn(transcribe())

    def _spawn(self, work: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(work)
        self._background.add(task)

        def finished(done: asyncio.Task[Any]) -> None:
            self._background.discard(done)
            self.service.changed()
            if not done.cancelled() and done.exception() is not None:
                logger.error("a realtime task failed", exc_info=done.exception())

        task.add_done_callback(finished)
        return task

    # --- conversation items --------------------------------------------------------------

    async def _create_item(self, event: ConversationItemCreate) -> None:
        item = parse_item(event.item, event.event_id)
        audio = next((p for p in item.content if p.type == "input_audio" and p.audio), None)
        if item.role != "user" and any(p.type == "input_audio" for p in item.content):
            raise RealtimeError(
                "only user items hold input audio", param="item.content", event_id=event.event_id
            )
        try:
            previous = self.conversation.add(item, event.previous_item_id)
        except KeyError:
            raise self._no_item(event.previous_item_id or "", event.event_id) from None
        await self.send(ItemAdded(item=item.wire(), previous_item_id=previous))
        if audio is not None and not audio.transcript:
            decoder = InputDecoder(self.config.audio.input.format.type)
            try:
                samples = decoder.decode(base64.b64decode(audio.audio or "", validate=True))
            except (binascii.Error, ValueError):
                raise RealtimeError(
                    "input_audio is not base64", param="item.content", event_id=event.event_id
                ) from None
            self._transcribe(item, samples, respond=False)
        else:
            await self.send(ItemDone(item=item.wire(), previous_item_id=previous))

    async def _delete(self, event: ConversationItemDelete) -> None:
        """Forget the item here and in the stored conversation (what `/invocations` and a
        later socket answer from): the store shares the turn the item revises."""
        try:
            turn = self.conversation.delete(event.item_id)
        except KeyError:
            raise self._no_item(event.item_id, event.event_id) from None
        if self.conversation_id and turn is not None and not (turn.question or turn.answer):
            self.service.conversations.forget(self.conversation_id, turn)
        await self.send(ItemDeleted(item_id=event.item_id))

    async def _truncate(self, event: ConversationItemTruncate) -> None:
        entry = self.conversation.find(event.item_id)
        if entry is None:
            raise self._no_item(event.item_id, event.event_id)
        if entry.turn is None:
            raise RealtimeError(
                "only the server's own answers (assistant items with audio) can be truncated",
                param="item_id",
                event_id=event.event_id,
            )
        spoken_ms = sum(piece.duration_s for piece in entry.turn.pieces) * 1000
        if event.audio_end_ms > spoken_ms + 1:
            raise RealtimeError(
                f"audio_end_ms {event.audio_end_ms} is past the item's audio ({spoken_ms:.0f} ms)",
                param="audio_end_ms",
                event_id=event.event_id,
            )
        entry.turn.heard_s = event.audio_end_ms / 1000
        entry.item = entry.item.model_copy(
            update={"content": [ContentPart(type="output_audio", transcript=entry.turn.answer)]}
        )
        await self.send(
            ItemTruncated(
                item_id=event.item_id,
                content_index=event.content_index,
                audio_end_ms=event.audio_end_ms,
            )
        )

    def _no_item(self, item_id: str, event_id: str | None) -> RealtimeError:
        return RealtimeError(
            f"there is no item {item_id!r} in the conversation",
            code="item_not_found",
            param="item_id",
            event_id=event_id,
        )

    # --- responses -----------------------------------------------------------------------

    async def say(self, text: str) -> None:
        """Speak `text` word for word as the assistant's answer (a phone call's greeting)."""
        await self._start_response("", llm=Scripted(text))

    async def _respond(self, event: ResponseCreate) -> None:
        params = event.response
        if params.conversation not in (None, "auto"):
            raise unsupported(
                "a response outside the conversation", "response.conversation", event.event_id
            )
        if self.response is not None:
            raise RealtimeError(
                "the conversation already has an active response",
                code="conversation_already_has_active_response",
                event_id=event.event_id,
            )
        if self.transcribing is not None and not self.transcribing.done():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self.transcribing), TRANSCRIPTION_WAIT_S)
        instructions = (
            params.instructions if params.instructions is not None else self.config.instructions
        )
        modalities = params.output_modalities or self.config.output_modalities
        await self._start_response(instructions, event.event_id, params.metadata, modalities)

    async def _start_response(
        self,
        instructions: str,
        event_id: str | None = None,
        metadata: dict[str, str] | None = None,
        modalities: list[str] | None = None,
        llm: Any = None,
    ) -> None:
        if self.response is not None:
            return
        if not self.service.admit():
            raise RealtimeError(
                "the agent is answering as many requests as it may; try again shortly",
                code="busy",
                type="server_error",
                event_id=event_id,
            )
        question = self.conversation.question()
        messages = self.conversation.messages()
        response_id = new_id("resp")
        if self.conversation_id:
            _, turn = await self.service.conversations.begin(
                self.conversation_id, response_id, question
            )
        else:
            turn = Turn(response_id, question)
        response = self._response(
            instructions, turn, messages, self._ended, metadata=metadata, modalities=modalities, llm=llm
        )
        self.response = response
        self.conversation.ask(turn)
        previous = self.conversation.add(response.item)
        entry = self.conversation.find(response.item.id)
        if entry is not None:
            entry.turn = turn
        await response.start(previous)

    def _response(
        self,
        instructions: str,
        turn: Turn,
        messages: Any,
        on_end: Callable[[Response], None],
        *,
        metadata: dict[str, str] | None = None,
        modalities: list[str] | None = None,
        llm: Any = None,
        held: bool = False,
    ) -> Response:
        output = self.config.audio.output
        system = "\n".join(p for p in (instructions, self.conversation.instructions()) if p)
        return Response(
            self._setup if llm is None else replace(self._setup, llm=llm),
            self._send,
            voice=output.voice,
            kokoro_voice=output.kokoro_voice,
            speed=output.speed,
            output_format=output.format,
            instructions=system,
            messages=messages,
            turn=turn,
            on_end=on_end,
            metadata=metadata,
            modalities=list(modalities or self.config.output_modalities),
            held=held,
        )

    def _ended(self, response: Response) -> None:
        self.service.release()
        entry = self.conversation.find(response.item.id)
        if entry is not None:
            entry.item = response.item
        if self.conversation_id:
            self.service.conversations.finish(self.conversation_id, response.turn)
        if self.response is response:
            self.response = None
        self.last_response = response
        self.service.changed()  # the socket may be idle now: the drain looks again

    async def _cancel(self, response: Response, reason: str) -> None:
        """Mute `response` and drop its queued audio before anything else can be sent."""
        self._drop(response.id)
        await response.cancel(reason)
        if self.response is response:
            self.response = None
            self.last_response = response
