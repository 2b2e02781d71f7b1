"""One answer of the agent as the events of PROTOCOL.md section 2: text from the LLM, speech
from the speech server, in the order they happen.

Two tasks write to one bounded queue, and `run` yields what the queue holds, so events
leave in true arrival order:

- the *text* task drains the LLM stream, emits `text_delta`s and sends the text, raw, over
  one persistent speech session: in `bidi` mode each delta as it comes, as a piece of one
  streamed utterance (the speech server cuts and normalizes it, once: latency mode's short
  first chunk, then sentences), in the batch modes the whole answer once the LLM has
  finished. The agent cuts and rewrites nothing, so the server's word times carry the
  words as the LLM wrote them, at their offsets in the answer's text;
- the *audio* task drains the session and emits `audio_chunk`s: as they arrive (`bidi`,
  `batch-stream`), or, in `batch`, only once the one request is complete, which is the
  reference's baseline.

A caller that reads slowly holds the tasks back, not memory: once `EVENT_QUEUE_SIZE`
events wait, each task waits for room (until the answer's deadline), so the text task stops
reading the LLM and the audio task stops reading the speech session.

The audio travels base64-encoded inside JSON events: Bedrock AgentCore streams only JSON
events (Server-Sent Events) from an agent runtime, so binary frames cannot cross this hop.

Failures stay in the stream: a speech server that cannot be reached, an LLM that fails, a
request the speech server refuses, or a bug become one `error` event, then `agent_end`; the
caller never sees a traceback. A caller that goes away (closes or cancels the generator)
stops the LLM, cancels the speech requests and leaves no task behind.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel
from strands import Agent
from strands.models import Model
from strands.types.content import Messages

from voicestream.agent.conversation import Turn
from voicestream.agent.env import fields_from_env
from voicestream.agent.llm import stream_text
from voicestream.agent.ticking import Tick, ticking
from voicestream.client import (
    AudioChunk,
    ConnectionLostError,
    SpeechBusyError,
    SpeechCompleted,
    SpeechError,
    SpeechEvent,
    SpeechFailed,
    SpeechSession,
    Transport,
    WebSocketTransport,
    WordTimes,
)
from voicestream.client.resume import ResumePolicy
from voicestream.protocol import (
    AgentEnd,
    AgentError,
    AgentRequest,
    AgentStart,
    AudioStreamEnd,
    AudioStreamStart,
    ErrorCode,
    SentenceSent,
    SentenceWords,
    TextDelta,
    new_request_id,
    voice_language,
)
from voicestream.protocol import AudioChunk as AudioChunkEvent
from voicestream.text import STREAMED, ChunkSchedule

logger = logging.getLogger(__name__)

SPEECH_RESUME = ResumePolicy(attempts=3, backoff_s=0.2)
"""A speech server that drains (a rolling update) or drops the connection mid-answer: the
session reconnects behind the same address and the answer goes on (WebSocket transports)."""
AUDIO_FORMAT = "pcm16"
SAMPLE_RATE = 24000
DEFAULT_FIRST_CLAUSE_WORDS = STREAMED.first_words
"""Bidi's first chunk ends at the first good break once it holds three words, at the latest
after six: the speech server's streamed schedule (`voicestream.text.STREAMED`)."""
DEFAULT_CHUNK_SENTENCES = STREAMED.sentences
"""After the first sentence: one sentence, then two at a time."""
DEFAULT_SCHEDULE = STREAMED
CLEANUP_TIMEOUT_S = 3.0
"""How long stopping the LLM and the speech session may take before they are abandoned."""
EVENT_QUEUE_SIZE = 32
"""Events an answer holds for a caller that has not taken them yet (an audio chunk is at
most a few tens of kB of base64): beyond that its tasks wait."""
MAX_BODY_BYTES = 12 * 1024 * 1024
"""The largest spoken question (8 MiB of recording, 11.2 MB in base64) and its fields."""


@dataclass(frozen=True, slots=True)
class AnswerLimits:
    """What keeps answers finite and the agent's load bounded (PROTOCOL.md section 2).

    `max_answers` answers at once (more get `busy` at once); prompts up to
    `max_prompt_chars` (longer ones get `text_too_long`); an answer ends with
    `answer_timeout` after `answer_timeout_s`, and a caller that takes nothing for as long
    is dropped; a speech server that sends nothing for
    `speech_timeout_s` while requests are pending ends it with `speech_unavailable`;
    `keepalive_s` is the most an SSE stream stays silent (a comment keeps proxies patient);
    request bodies over `max_body_bytes` are refused (`payload_too_large`, 413) unread.
    A Realtime socket with nothing under way that hears nothing for `realtime_idle_s` is
    closed (1000); one event that takes longer than `realtime_send_s` to send closes it (1008).
    """

    max_answers: int = 8
    max_prompt_chars: int = 4000
    answer_timeout_s: float = 300.0
    speech_timeout_s: float = 30.0
    keepalive_s: float = 15.0
    max_body_bytes: int = MAX_BODY_BYTES
    realtime_idle_s: float = 600.0
    realtime_send_s: float = 30.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AnswerLimits:
        """From VOICESTREAM_MAX_ANSWERS, VOICESTREAM_MAX_PROMPT_CHARS,
        VOICESTREAM_ANSWER_TIMEOUT_S, VOICESTREAM_SPEECH_TIMEOUT_S, VOICESTREAM_KEEPALIVE_S,
        VOICESTREAM_MAX_BODY_BYTES, VOICESTREAM_REALTIME_IDLE_S, VOICESTREAM_REALTIME_SEND_S."""
        return cls(**fields_from_env(cls, env))


class _Failure(Exception):
    """Ends the answer with one `error` event."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class CallerStalled(Exception):
    """The caller took nothing for longer than it may (the answer's deadline, one send's
    timeout): whatever waits for it to read gives up."""


@dataclass(frozen=True, slots=True)
class _Finished:
    task: str


class _Answer:
    """The state of one answer: its clock, its deadline, its counters and the queue both
    tasks write to."""

    def __init__(
        self, request: AgentRequest, request_id: str, deadline: float, turn: Turn
    ) -> None:
        self.request = request
        self.request_id = request_id
        self.deadline = deadline
        """When the answer must end, on the event loop's clock."""
        self.turn = turn
        """What the conversation keeps of this answer: its text, and its spoken pieces with
        the length of their audio (for cutting it where the listener interrupted)."""
        self.language = request.lang or voice_language(request.voice)
        """What the answer is written and read in: the request's `lang`, else its voice's."""
        self.queue: asyncio.Queue[dict[str, Any] | _Finished | _Failure] = asyncio.Queue(
            EVENT_QUEUE_SIZE
        )
        self._started = time.perf_counter()
        self.text_seq = 0
        self.chunk_seq = 0
        self.sentences = 0
        self.audio_started = False
        self.duration_s = 0.0
        self.ttft_ms: float | None = None
        self.ttfa_ms: float | None = None
        self.first_sentence_ms: float | None = None
        self.first_sentence_synthesis_s: float | None = None

    def t_ms(self) -> float:
        return round((time.perf_counter() - self._started) * 1000, 1)

    def event(self, model: type[BaseModel], **fields: Any) -> dict[str, Any]:
        """One event of `model`, stamped with the request id and the time since agent_start."""
        stamped = model(request_id=self.request_id, t_ms=self.t_ms(), **fields)
        return stamped.model_dump(mode="json", exclude_none=True)

    async def emit(self, model: type[BaseModel], **fields: Any) -> dict[str, Any]:
        event = self.event(model, **fields)
        await self.put(event)
        return event

    async def put(self, item: dict[str, Any] | _Finished | _Failure) -> None:
        """Queue `item` once there is room; a caller that takes nothing until the deadline
        ends the waiting task (`CallerStalled`), and `run` reports the deadline."""
        try:
            async with asyncio.timeout_at(self.deadline):
                await self.queue.put(item)
        except TimeoutError:
            raise CallerStalled from None

    def end(self) -> dict[str, Any]:
        """`agent_end`, with the benchmark's extension fields when they were measured."""
        return self.event(
            AgentEnd,
            ttft_ms=self.ttft_ms,
            ttfa_ms=self.ttfa_ms,
            first_sentence_ms=self.first_sentence_ms,
            first_sentence_synthesis_s=self.first_sentence_synthesis_s,
        )


def speech_transport(target: str, api_key: str | None = None) -> Transport:
    """The transport to the speech server named by `target`.

    `ws://`, `wss://`, `http://` or `https://` reach the server's WebSocket session route
    (a base URL is enough), sending `api_key` as a Bearer header when given; a `?key=` in
    the URL is refused (the server no longer reads keys from URLs). `sagemaker://ENDPOINT_NAME`
    (optionally `?region=us-east-1`) reaches a SageMaker endpoint's bidirectional stream
    (IAM, no key), which needs the `aws` extra.
    """
    parts = urlsplit(target)
    if "key" in parse_qs(parts.query):
        raise ValueError("a key in the speech server's URL is not accepted: give it as the speech API key")
    if parts.scheme == "sagemaker":
        from voicestream.client import SageMakerTransport

        if not parts.netloc:
            raise ValueError(f"no endpoint name in {target!r}: use sagemaker://ENDPOINT_NAME")
        region = parse_qs(parts.query).get("region", [None])[0]
        return SageMakerTransport(parts.netloc, region)
    return WebSocketTransport(target, api_key=api_key)


async def connect_speech(
    speech_url: str, request: AgentRequest, api_key: str | None = None
) -> SpeechSession:
    """A persistent speech session with the request's voice and speed, pcm16 at 24 kHz."""
    try:
        transport = speech_transport(speech_url, api_key)
    except ValueError as error:
        raise ConnectionLostError(f"no speech server at {speech_url!r}: {error}") from error
    return await SpeechSession.connect(
        transport,
        voice=request.voice,
        speed=request.speed,
        format=AUDIO_FORMAT,
        sample_rate=SAMPLE_RATE,
        lang=request.lang,
        word_timestamps=True,  # what was heard when the listener interrupts (conversation.py)
        resume=SPEECH_RESUME,
    )


async def run(
    request: AgentRequest,
    llm: Model | Agent,
    speech_url: str,
    *,
    speech_api_key: str | None = None,
    request_id: str | None = None,
    schedule: ChunkSchedule = DEFAULT_SCHEDULE,
    limits: AnswerLimits | None = None,
    deadline: float | None = None,
    messages: Messages | None = None,
    turn: Turn | None = None,
) -> AsyncGenerator[dict[str, Any], None]:
    """Answer `request`, yielding PROTOCOL.md section 2 events as JSON-ready dicts.

    `llm` is a Strands model or agent (see `stream_text`); `speech_url` names the speech
    server and `speech_api_key` is its key, if it has one (see `speech_transport`). The first event is `agent_start`, the last `agent_end`.
    `agent_end` carries two extension fields for the benchmark: `first_sentence_ms` (when
    the first speech request was sent: in `bidi` the first sentence, in the batch modes the
    whole answer) and `first_sentence_synthesis_s` (the speech server's `elapsed_s` for it).

    `schedule` picks how the speech server cuts bidi's text: latency mode (any schedule with
    `first_words`: the server's `STREAMED`, whose first chunk ends at the first good break
    after three words, so that it is synthesized sooner) or whole sentences (without).

    `limits` gives the answer's deadline and how long the speech server may stay silent;
    `deadline` (on the event loop's clock) replaces `answer_timeout_s` from now, for an
    answer whose time started earlier (a spoken question, once transcribed).

    `messages` are the conversation so far, ending with the request's prompt (see
    `conversation.chat`; by default the prompt alone); `turn` receives the answer's text,
    its spoken pieces and their audio as they go out.
    """
    limits = limits or AnswerLimits()
    if deadline is None:
        deadline = asyncio.get_running_loop().time() + limits.answer_timeout_s
    request_id = request_id or new_request_id()
    answer = _Answer(request, request_id, deadline, turn or Turn(request_id, request.prompt))
    yield answer.event(AgentStart, mode=request.mode)
    connecting = asyncio.create_task(
        connect_speech(speech_url, request, speech_api_key), name="speech-connect"
    )
    tasks = [
        asyncio.create_task(
            _text_task(
                answer, llm, messages, connecting,
                "latency" if schedule.first_words is not None else "sentences",
            ),
            name="agent-text",
        ),
        asyncio.create_task(
            _audio_task(answer, connecting, limits.speech_timeout_s), name="agent-audio"
        ),
    ]
    try:
        finished: set[str] = set()
        while len(finished) < len(tasks):
            try:
                async with asyncio.timeout_at(answer.deadline):
                    item = await answer.queue.get()
            except TimeoutError:
                logger.warning("answer %s passed its deadline", answer.request_id)
                item = _Failure(
                    ErrorCode.ANSWER_TIMEOUT,
                    f"the answer took longer than {limits.answer_timeout_s:g} s and was stopped",
                )
            if isinstance(item, _Finished):
                finished.add(item.task)
            elif isinstance(item, _Failure):
                yield answer.event(AgentError, code=item.code, message=item.message)
                yield answer.end()
                return
            else:
                yield item
        if answer.audio_started:
            yield answer.event(
                AudioStreamEnd,
                total_chunks=answer.chunk_seq,
                duration_s=round(answer.duration_s, 3),
            )
        yield answer.end()
    finally:
        await _shielded(_stop(tasks, connecting))


async def write(
    request: AgentRequest,
    llm: Model | Agent,
    *,
    request_id: str | None = None,
    limits: AnswerLimits | None = None,
    messages: Messages | None = None,
    turn: Turn | None = None,
) -> AsyncGenerator[dict[str, Any], None]:
    """Answer `request` in text only, asking no speech server: `run`'s events less the
    audio (`agent_start`, `text_delta`s, `agent_end`), within the same deadline; an LLM
    failure or the deadline ends it with one `error`. `turn` receives the text."""
    limits = limits or AnswerLimits()
    deadline = asyncio.get_running_loop().time() + limits.answer_timeout_s
    request_id = request_id or new_request_id()
    answer = _Answer(request, request_id, deadline, turn or Turn(request_id, request.prompt))
    yield answer.event(AgentStart, mode=request.mode)
    stream = stream_text(llm, messages or request.prompt, answer.language)
    try:
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    delta = await anext(stream)
            except StopAsyncIteration:
                break
            except TimeoutError:
                late = f"the answer took longer than {limits.answer_timeout_s:g} s and was stopped"
                yield answer.event(AgentError, code=ErrorCode.ANSWER_TIMEOUT, message=late)
                break
            except Exception as error:  # noqa: BLE001 - any provider's failure is llm_error
                logger.warning("the LLM failed: %r", error)
                failed = _llm_message(error)
                yield answer.event(AgentError, code=ErrorCode.LLM_ERROR, message=failed)
                break
            answer.turn.add_text(delta)
            event = answer.event(TextDelta, seq=answer.text_seq, text=delta)
            answer.ttft_ms = answer.ttft_ms or event["t_ms"]
            answer.text_seq += 1
            yield event
    finally:
        await stream.aclose()
    yield answer.end()


async def _text_task(
    answer: _Answer,
    llm: Model | Agent,
    messages: Messages | None,
    connecting: asyncio.Task[SpeechSession],
    chunking: str,
) -> None:
    bidi = answer.request.mode == "bidi"
    parts: list[str] = []
    utterance: str | None = None  # bidi's streamed utterance, once its first piece went

    async def sent(text: str) -> None:
        """The answer's one speech request went out (its first piece, in bidi)."""
        await answer.emit(SentenceSent, index=0, text=text)
        answer.turn.add_piece(text)
        answer.first_sentence_ms = answer.t_ms()
        answer.sentences = 1

    try:
        stream = stream_text(llm, messages or answer.request.prompt, answer.language)
        try:
            while True:
                try:
                    delta = await anext(stream)
                except StopAsyncIteration:
                    break
                except Exception as error:
                    logger.warning("the LLM failed: %r", error)
                    raise _Failure(ErrorCode.LLM_ERROR, _llm_message(error)) from error
                event = await answer.emit(TextDelta, seq=answer.text_seq, text=delta)
                answer.turn.add_text(delta)
                if answer.ttft_ms is None:
                    answer.ttft_ms = event["t_ms"]
                answer.text_seq += 1
                if not bidi:
                    parts.append(delta)
                elif utterance is None and delta.strip():
                    session = await connecting
                    utterance = await session.submit_piece(answer.turn.text, chunking=chunking)
                    await sent(answer.turn.text)
                elif utterance is not None and delta:
                    answer.turn.extend_piece(0, delta)
                    await (await connecting).submit_piece(delta, utterance)
        finally:
            await stream.aclose()
        session = await connecting
        if utterance is not None:
            await session.submit_piece("", utterance, more=False)
        elif not bidi and "".join(parts).strip():
            await session.submit("".join(parts))
            await sent("".join(parts))
        await session.close()
    except Exception as error:
        await _report(answer, error)
        raise
    await answer.put(_Finished("text"))


async def _audio_task(
    answer: _Answer, connecting: asyncio.Task[SpeechSession], speech_timeout_s: float
) -> None:
    held: list[AudioChunk | WordTimes] = []  # batch holds its audio, and its times go with it
    try:
        session = await connecting
        async for event in _events_while_alive(session, speech_timeout_s):
            if isinstance(event, AudioChunk | WordTimes):
                if isinstance(event, WordTimes):
                    answer.turn.add_words(event.index, event.words)
                if answer.request.mode == "batch":
                    held.append(event)
                else:
                    await _emit_speech(answer, event)
            elif isinstance(event, SpeechCompleted):
                answer.duration_s += event.total_duration_s
                if event.index == 0:
                    answer.first_sentence_synthesis_s = event.elapsed_s
                for kept in held:
                    await _emit_speech(answer, kept)
                held.clear()
            elif isinstance(event, SpeechFailed):
                raise event.error
    except Exception as error:
        await _report(answer, error)
        raise
    await answer.put(_Finished("audio"))


STALL_CHECK_S = 0.5


async def _events_while_alive(
    session: SpeechSession, speech_timeout_s: float
) -> AsyncGenerator[SpeechEvent, None]:
    """The session's events; a `speech_unavailable` failure once the server has sent
    nothing for `speech_timeout_s` while requests wait for it (so that neither reading
    nor `close` can wait forever on a server that stalled)."""
    quiet_since = time.monotonic()
    async with contextlib.aclosing(ticking(session.events(), STALL_CHECK_S)) as events:
        async for event in events:
            now = time.monotonic()
            if not isinstance(event, Tick):
                quiet_since = now
                yield event
            elif not session.pending:
                quiet_since = now
            elif now - quiet_since > speech_timeout_s:
                raise _Failure(
                    ErrorCode.SPEECH_UNAVAILABLE,
                    f"the speech server sent nothing for {speech_timeout_s:g} s",
                )


async def _emit_speech(answer: _Answer, event: AudioChunk | WordTimes) -> None:
    """Pass one event of the speech session on to the caller: audio, or the word times that
    come before it."""
    if isinstance(event, WordTimes):
        await answer.emit(SentenceWords, sentence=event.index, words=event.words)
    else:
        await _emit_audio(answer, event)


async def _emit_audio(answer: _Answer, chunk: AudioChunk) -> None:
    if not answer.audio_started:
        answer.audio_started = True
        await answer.emit(
            AudioStreamStart,
            format=AUDIO_FORMAT,
            sample_rate=SAMPLE_RATE,
            voice=answer.request.voice,
        )
    event = await answer.emit(
        AudioChunkEvent, seq=answer.chunk_seq, data=_base64(chunk.data), sentence=chunk.index
    )
    answer.turn.add_audio(chunk.index, len(chunk.data))
    if answer.ttfa_ms is None:
        answer.ttfa_ms = event["t_ms"]
    answer.chunk_seq += 1


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


async def _report(answer: _Answer, error: Exception) -> None:
    """Put the failure a task ended with on the queue, as the `error` event it becomes; past
    the deadline (the caller took nothing) `run` reports the deadline instead."""
    if isinstance(error, CallerStalled):
        return
    if isinstance(error, _Failure):
        failure = error
    elif isinstance(error, SpeechError):
        failure = _speech_failure(error)
    else:
        logger.exception("the agent failed", exc_info=error)
        failure = _Failure(ErrorCode.INTERNAL, "the agent failed; see its log")
    with contextlib.suppress(CallerStalled):
        await answer.put(failure)


def _speech_failure(error: SpeechError) -> _Failure:
    """`speech_unavailable` when the server cannot be reached, is busy or the session broke;
    otherwise the server's own code for the request it refused (`unknown_voice`, say)."""
    if isinstance(error, (ConnectionLostError, SpeechBusyError)) or error.code not in _SERVER_CODES:
        return _Failure(
            ErrorCode.SPEECH_UNAVAILABLE, f"the speech server is unavailable: {error.message}"
        )
    return _Failure(error.code, f"the speech server refused the answer: {error.message}")


_SERVER_CODES = frozenset(code.value for code in ErrorCode) - {ErrorCode.BUSY.value}


def _llm_message(error: Exception) -> str:
    """A message for people: the provider's error type, without a raw traceback."""
    detail = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
    name = type(error).__name__
    return (
        f"the language model failed ({name}: {detail})"
        if detail
        else f"the language model failed ({name})"
    )


async def _shielded(cleanup: Coroutine[Any, Any, None]) -> None:
    """Run `cleanup` to its end even if the caller is cancelled again while it waits (a
    server's cancel scope re-cancels on every await): it then finishes in its own task."""
    task = asyncio.ensure_future(cleanup)
    await asyncio.shield(task)


async def _stop(tasks: list[asyncio.Task[None]], connecting: asyncio.Task[SpeechSession]) -> None:
    """Cancel what is still running; cancel and close the speech session unless the answer
    ended cleanly (then the text task has closed it already)."""
    clean = all(t.done() and not t.cancelled() and t.exception() is None for t in tasks)
    for task in (*tasks, connecting):
        task.cancel()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(CLEANUP_TIMEOUT_S):
            await asyncio.gather(*tasks, connecting, return_exceptions=True)
    if clean or not connecting.done() or connecting.cancelled() or connecting.exception():
        return
    session = connecting.result()
    try:
        async with asyncio.timeout(CLEANUP_TIMEOUT_S):
            await session.cancel()
            await session.close()
    except Exception:  # noqa: BLE001 - any failure here ends in dropping the connection
        logger.warning("the speech session did not close in order; dropping its connection")
        with contextlib.suppress(Exception):
            await session.transport.close()
