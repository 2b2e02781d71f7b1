"""pipecat's own TTS services in a real pipeline: what the face tests drive through a pipecat
client (Cartesia, ElevenLabs, Deepgram), gathered per TTS context."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any


class Turns:
    """pipecat's downstream frames, per TTS context: audio bytes, timed words, the end, and
    events a test can wait on."""

    def __init__(self) -> None:
        self.audio: dict[str, int] = {}
        self.words: dict[str, list[str]] = {}
        self.first_audio: dict[str, asyncio.Event] = {}
        self.stopped: dict[str, asyncio.Event] = {}
        self.errors: list[str] = []

    def event(self, table: dict[str, asyncio.Event], context_id: str) -> asyncio.Event:
        return table.setdefault(context_id, asyncio.Event())

    async def next_context(self, known: set[str], timeout: float = 120) -> str:
        """The first context not in ``known`` to send audio."""
        async with asyncio.timeout(timeout):
            while not (fresh := set(self.first_audio) - known):
                await asyncio.sleep(0.02)
        (context_id,) = fresh
        await asyncio.wait_for(self.first_audio[context_id].wait(), timeout)
        return context_id


def pipecat_sink(turns: Turns) -> Any:
    """A frame processor that records into ``turns`` what the TTS service pushes downstream."""
    from pipecat.frames.frames import ErrorFrame, TTSAudioRawFrame, TTSStoppedFrame, TTSTextFrame
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

    class Sink(FrameProcessor):
        async def process_frame(self, frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, TTSAudioRawFrame) and frame.audio:
                turns.audio[frame.context_id] = turns.audio.get(frame.context_id, 0) + len(frame.audio)
                turns.event(turns.first_audio, frame.context_id).set()
            elif isinstance(frame, TTSTextFrame) and frame.context_id:
                turns.words.setdefault(frame.context_id, []).append(frame.text)
            elif isinstance(frame, TTSStoppedFrame) and frame.context_id:
                turns.event(turns.stopped, frame.context_id).set()
            elif isinstance(frame, ErrorFrame):
                turns.errors.append(frame.error)
            await self.push_frame(frame, direction)

    return Sink()


class Pipeline:
    """A running pipeline of ``tts`` and a sink: the LLM's answers go in, ``turns`` fill."""

    def __init__(self, task: Any, turns: Turns) -> None:
        self.task = task
        self.turns = turns

    async def answer(self, *tokens: str, end: bool = True) -> None:
        """An LLM answer, token by token; ``end=False`` leaves it open (to be interrupted)."""
        from pipecat.frames.frames import (
            LLMFullResponseEndFrame,
            LLMFullResponseStartFrame,
            LLMTextFrame,
        )

        await self.task.queue_frames([LLMFullResponseStartFrame(), *(LLMTextFrame(t) for t in tokens)])
        if end:
            await self.task.queue_frame(LLMFullResponseEndFrame())

    async def spoken_answer(self, *tokens: str, timeout: float = 120) -> str:
        """An LLM answer, token by token, and the id of its context once it has stopped."""
        known = set(self.turns.first_audio)
        await self.answer(*tokens)
        context = await self.turns.next_context(known, timeout)
        await asyncio.wait_for(self.turns.event(self.turns.stopped, context).wait(), timeout)
        return context

    async def interrupt(self) -> None:
        from pipecat.frames.frames import InterruptionFrame

        await self.task.queue_frame(InterruptionFrame())


@contextlib.asynccontextmanager
async def running_pipeline(tts: Any, sink: Any = None) -> AsyncIterator[Pipeline]:
    """``tts`` in a pipeline at 24 kHz, ended (EndFrame) when the block ends; ``sink`` (a
    frame processor) instead of the one that fills ``turns``."""
    from pipecat.frames.frames import EndFrame
    from pipecat.pipeline.pipeline import Pipeline as PipecatPipeline
    from pipecat.pipeline.task import PipelineParams
    from pipecat.pipeline.worker import PipelineWorker
    from pipecat.workers.runner import WorkerRunner

    turns = Turns()
    task = PipelineWorker(PipecatPipeline([tts, sink or pipecat_sink(turns)]), params=PipelineParams(audio_out_sample_rate=24000))
    pipecat_runner = WorkerRunner(handle_sigint=False)
    await pipecat_runner.add_workers(task)
    runner = asyncio.create_task(pipecat_runner.run())
    try:
        yield Pipeline(task, turns)
    finally:
        await task.queue_frame(EndFrame())
        await asyncio.wait_for(runner, 60)
