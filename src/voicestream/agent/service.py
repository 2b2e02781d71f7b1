"""The service behind the agent's routes: the app (`voicestream.agent.app`) makes one, and
its Realtime sockets (`voicestream.agent.realtime`) act on it, so it lives apart from both."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncGenerator
from typing import Any

from strands.models import Model

from voicestream.agent.conversation import ConversationStore
from voicestream.agent.llm import system_prompt
from voicestream.agent.runtime import run
from voicestream.agent.settings import AgentSettings
from voicestream.agent.speech_input import SpeechRecognizer
from voicestream.edge.connection import EdgeLimits
from voicestream.edge.drain import Drain, GoesAway
from voicestream.limits import MAX_SESSION_ERRORS
from voicestream.protocol import (
    MAX_SESSION_ID_CHARS,
    SESSION_HEADER,
    AgentAudioRequest,
    AgentEnd,
    AgentError,
    ErrorCode,
    ProtocolError,
    Transcript,
    new_request_id,
    parse_agent_request,
)

logger = logging.getLogger(__name__)

def _refusal(code: ErrorCode, message: str) -> list[dict[str, Any]]:
    """An answer that ends before it starts: `error`, then `agent_end`."""
    request_id = new_request_id()
    return [
        _dump(AgentError(request_id=request_id, t_ms=0.0, code=code, message=message)),
        _dump(AgentEnd(request_id=request_id, t_ms=0.0)),
    ]


class AgentService:
    """What the app's entrypoint holds: the settings, the one LLM, the speech recognizer,
    the conversations, the answers in progress."""

    def __init__(self, settings: AgentSettings, llm: Model) -> None:
        self.settings = settings
        self.llm = llm
        self.recognizer = SpeechRecognizer(settings.asr_model)
        self.conversations = ConversationStore(settings.conversations)
        self.active_answers = 0
        self.draining = False
        self.connections: set[GoesAway] = set()
        """The open Realtime sockets (the edge adds and removes them; the drain sends each away
        once it is idle)."""
        self.edge = Drain()
        """The drain's waits; the app's `DrainWatch` wakes them."""
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """Load the local model's weights and evaluate the default language's system prompt
        in a thread, so that the first answer waits for neither (about 0.45 s here)."""
        load = getattr(self.llm, "load", None)
        if load is None:
            return
        prefill = getattr(self.llm, "prefill", None)

        def load_quietly() -> None:
            try:
                load()
                if prefill is not None:
                    prefill(system_prompt())
            except Exception:
                logger.exception("the local LLM failed to load")

        threading.Thread(target=load_quietly, name="llm-load", daemon=True).start()

    async def drain(self, grace_s: float) -> None:
        """Refuse new answers and sockets, wait up to `grace_s` for those under way to end
        (`voicestream.edge.drain`): a Realtime socket goes away (1001) as soon as it has nothing
        left to send, and at the end of the grace whatever it holds (as the speech server's
        connections do); an answer still being streamed then ends without its last chunk."""
        self.draining = True
        await self.edge.run(grace_s, self.connections, lambda: not self.active_answers and not self.connections)

    # --- the edge's admission protocol (`voicestream.edge.connection.Host`) ---------------

    @property
    def edge_limits(self) -> EdgeLimits:
        limits = self.settings.limits
        return EdgeLimits(limits.realtime_send_s, limits.realtime_idle_s, MAX_SESSION_ERRORS)

    def admit_connection(self) -> object:
        """A Realtime socket takes no slot of its own: its answers are admitted one by one."""
        return self

    def release_connection(self, slot: object) -> None:
        pass

    def count_error(self, code: str) -> None:
        logger.debug("realtime error event: %s", code)

    def count_close(self, code: int) -> None:
        logger.debug("closed a Realtime socket (%d)", code)

    def changed(self) -> None:
        self.edge.changed()

    def admit(self) -> bool:
        """Count one more answer under way, unless draining or at `max_answers`; each
        admitted answer is `release`d once."""
        with self._lock:
            if self.draining or self.active_answers >= self.settings.limits.max_answers:
                return False
            self.active_answers += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.active_answers -= 1

    async def answer(
        self, payload: Any, session_id: str | None = None
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The events for one invocation payload; a bad payload gives `error`, `agent_end`,
        and so does one beyond `max_answers` answers at once (`busy`, at once). A spoken
        question's answer starts with its `transcript`. With a `session_id` the answer
        knows the conversation's earlier turns, and becomes one of them."""
        limits = self.settings.limits
        if not self.admit():
            why = (
                "the agent is shutting down"
                if self.draining
                else f"the agent is already answering {limits.max_answers} requests"
            )
            for event in _refusal(ErrorCode.BUSY, f"{why}; try again shortly"):
                yield event
            return
        request_id = new_request_id()
        received = time.perf_counter()
        deadline = asyncio.get_running_loop().time() + limits.answer_timeout_s
        try:
            try:
                if not isinstance(payload, dict):
                    raise ProtocolError(
                        ErrorCode.INVALID_MESSAGE,
                        'the payload must be a JSON object, such as {"prompt": "..."}',
                    )
                request = parse_agent_request(payload)
                if isinstance(request, AgentAudioRequest):
                    heard = await self._transcribed(request, deadline)
                    took_ms = round((time.perf_counter() - received) * 1000, 1)
                    yield _dump(Transcript(request_id=request_id, t_ms=took_ms, text=heard))
                    request = request.asking(heard)
                if len(request.prompt) > limits.max_prompt_chars:
                    raise ProtocolError(
                        ErrorCode.TEXT_TOO_LONG,
                        f"the prompt has {len(request.prompt)} characters; at most "
                        f"{limits.max_prompt_chars} are accepted",
                    )
                if session_id is not None and len(session_id) > MAX_SESSION_ID_CHARS:
                    raise ProtocolError(
                        ErrorCode.INVALID_MESSAGE,
                        f"{SESSION_HEADER} must hold at most {MAX_SESSION_ID_CHARS} characters",
                    )
            except ProtocolError as error:
                for event in _refusal(error.code, error.message):
                    yield event
                return
            messages, turn = None, None
            if session_id:
                heard = request.interrupted
                messages, turn = await self.conversations.begin(
                    session_id,
                    request_id,
                    request.prompt,
                    interrupted_id=heard.request_id if heard else None,
                    heard_ms=heard.heard_ms if heard else None,
                )
            answer = run(
                request,
                self.llm,
                self.settings.speech_url,
                speech_api_key=self.settings.speech_api_key,
                request_id=request_id,
                schedule=self.settings.schedule,
                limits=limits,
                deadline=deadline,
                messages=messages,
                turn=turn,
            )
            try:
                async with contextlib.aclosing(answer):
                    async for event in answer:
                        yield event
            finally:
                if session_id and turn is not None:
                    self.conversations.finish(session_id, turn)
        finally:
            self.release()

    async def _transcribed(self, request: AgentAudioRequest, deadline: float) -> str:
        """The words of a spoken question, heard before the answer's deadline (`deadline`,
        on the event loop's clock): transcription is part of the answer's time."""
        try:
            async with asyncio.timeout_at(deadline):
                return await self.recognizer.transcribe_async(request)
        except TimeoutError:
            raise ProtocolError(
                ErrorCode.ANSWER_TIMEOUT,
                f"the answer took longer than {self.settings.limits.answer_timeout_s:g} s "
                "and was stopped",
            ) from None


def _dump(event: Any) -> dict[str, Any]:
    return event.model_dump(mode="json", exclude_none=True)
