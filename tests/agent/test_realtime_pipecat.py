"""pipecat's `OpenAIRealtimeLLMService`, unchanged, against the agent's Realtime endpoint (the
real agent and speech server, an echo LLM): a typed turn and a spoken one (server VAD, Whisper),
each answered with speech and its transcript."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.agent.llm_stubs import echo
from tests.agent.realtime_checks import chunks, echo_agent, silence, spoken
from tests.server.pipecat_harness import running_pipeline


class Answer:
    """What the service pushed downstream: audio bytes, transcript text, errors, the end."""

    def __init__(self) -> None:
        self.audio = 0
        self.words: list[str] = []
        self.errors: list[str] = []
        self.ended = asyncio.Event()

    def sink(self) -> Any:
        from pipecat.frames.frames import (
            ErrorFrame,
            LLMFullResponseEndFrame,
            TTSAudioRawFrame,
            TTSTextFrame,
        )
        from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

        answer = self

        class Sink(FrameProcessor):
            async def process_frame(self, frame, direction: FrameDirection) -> None:
                await super().process_frame(frame, direction)
                if isinstance(frame, TTSAudioRawFrame):
                    answer.audio += len(frame.audio)
                elif isinstance(frame, TTSTextFrame):
                    answer.words.append(frame.text)
                elif isinstance(frame, ErrorFrame):
                    answer.errors.append(frame.error)
                elif isinstance(frame, LLMFullResponseEndFrame):
                    answer.ended.set()
                await self.push_frame(frame, direction)

        return Sink()


async def test_pipecat_realtime_service_speaks_an_answer(speech_server):
    from pipecat.frames.frames import LLMContextFrame
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.services.openai.realtime.events import (
        AudioConfiguration,
        AudioInput,
        SessionProperties,
    )
    from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService

    with echo_agent(speech_server) as (url, llm):
        service = OpenAIRealtimeLLMService(
            api_key="unused",
            base_url=f"{url}/v1/realtime",
            settings=OpenAIRealtimeLLMService.Settings(
                session_properties=SessionProperties(audio=AudioConfiguration(input=AudioInput(turn_detection=False))),
            ),
        )
        answer = Answer()
        async with running_pipeline(service, answer.sink()) as pipeline:
            context = LLMContext(messages=[{"role": "user", "content": "Hello from pipecat"}])
            await pipeline.task.queue_frame(LLMContextFrame(context))
            await asyncio.wait_for(answer.ended.wait(), 120)
        assert not answer.errors
        assert answer.audio > 24000, "over half a second of 16-bit audio at 24 kHz"
        assert "".join(answer.words).strip() == "You said: Hello from pipecat. I was sent 1 messages."
        assert [m["role"] for m in llm.requests[-1]["messages"] if m["role"] != "system"] == ["user"]


async def test_pipecat_realtime_service_answers_a_spoken_turn(speech_server):
    """The microphone's frames go up as pipecat sends them (`input_audio_buffer.append`); the
    server's VAD ends the turn, Whisper hears it, and the echo LLM's answer (which repeats what
    it was sent) comes back spoken, so the answer proves what the server heard."""
    from pipecat.frames.frames import InputAudioRawFrame
    from pipecat.services.openai.realtime.events import (
        AudioConfiguration,
        AudioInput,
        SessionProperties,
        TurnDetection,
    )
    from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService

    question = silence(0.5) + spoken(speech_server, "What is the capital of France?") + silence(1.0)
    with echo_agent(speech_server) as (url, llm):
        service = OpenAIRealtimeLLMService(
            api_key="unused",
            base_url=f"{url}/v1/realtime",
            settings=OpenAIRealtimeLLMService.Settings(
                session_properties=SessionProperties(
                    audio=AudioConfiguration(input=AudioInput(turn_detection=TurnDetection()))
                ),
            ),
        )
        answer = Answer()
        async with running_pipeline(service, answer.sink()) as pipeline:
            await pipeline.task.queue_frames(
                [InputAudioRawFrame(audio=piece, sample_rate=24000, num_channels=1) for piece in chunks(question)]
            )
            await asyncio.wait_for(answer.ended.wait(), 120)
        assert not answer.errors
        sent = llm.requests[-1]["messages"]
        assert [m["role"] for m in sent if m["role"] != "system"] == ["user"]
        assert "capital of france" in echo(sent).lower()
        assert answer.audio > 24000, "over half a second of 16-bit audio at 24 kHz"
        assert "".join(answer.words).strip() == echo(sent)
