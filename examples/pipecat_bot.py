"""A pipecat bot that speaks through voicestream, with no cloud account.

pipecat's own ``CartesiaTTSService`` is pointed at voicestream's Cartesia-compatible
WebSocket; the LLM is any OpenAI-compatible server (the local demo's SmolLM2 served by
llama.cpp, Ollama, vLLM...). Questions are typed, one per line; each spoken answer is
written to ``answer-N.wav`` as its audio arrives (swap the sink for a transport, such as
``LocalAudioTransport`` or Daily, to hear it live).

    uv run voicestream serve                                     # speech on :8080
    uv run --with 'llama-cpp-python[server]' python -m llama_cpp.server \\
        --model "$(uv run python -c 'from voicestream.agent.local_llm import default_model_path as p; print(p())')" \\
        --port 8000                                              # the demo's LLM, OpenAI-compatible
    uv run python examples/pipecat_bot.py --llm-url http://127.0.0.1:8000/v1

docs/INTEGRATIONS.md lists the settings.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import wave

from pipecat.frames.frames import (
    EndFrame,
    Frame,
    LLMContextFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.task import PipelineParams
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.cartesia.tts import CartesiaTTSService
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.workers.runner import WorkerRunner

SAMPLE_RATE = 24000


class WavWriter(FrameProcessor):
    """Writes each spoken answer to its own WAV file."""

    def __init__(self) -> None:
        super().__init__()
        self.answers = 0
        self._file: wave.Wave_write | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            if self._file is None:
                self.answers += 1
                self._file = wave.open(f"answer-{self.answers}.wav", "wb")  # noqa: SIM115 - open across frames
                self._file.setparams((1, 2, SAMPLE_RATE, 0, "NONE", "not compressed"))
            self._file.writeframes(frame.audio)
        elif isinstance(frame, TTSStoppedFrame) and self._file is not None:
            self._file.close()
            self._file = None
            print(f"  -> answer-{self.answers}.wav", flush=True)
        await self.push_frame(frame, direction)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--speech-url", default="ws://127.0.0.1:8080/tts/websocket")
    parser.add_argument("--llm-url", default="http://127.0.0.1:8000/v1", help="an OpenAI-compatible base URL")
    parser.add_argument("--model", default="smollm2", help="the model name the LLM server expects")
    parser.add_argument("--voice", default="af_heart", help="a Kokoro voice or blend")
    parser.add_argument("--api-key", default="unused", help="voicestream's --api-key, if it has one")
    args = parser.parse_args()

    context = LLMContext()
    llm = OpenAILLMService(api_key="unused", base_url=args.llm_url, settings=OpenAILLMService.Settings(
        model=args.model, system_instruction="You are a helpful voice assistant. Answer in two sentences.",
    ))
    tts = CartesiaTTSService(
        api_key=args.api_key, url=args.speech_url, sample_rate=SAMPLE_RATE,
        settings=CartesiaTTSService.Settings(voice=args.voice),
        stop_frame_timeout_s=10,  # on a slow CPU a sentence can take longer than pipecat's 3 s
    )
    # voicestream times the words it speaks (Cartesia's timestamps), so pipecat's TTS pushes
    # them as TTSTextFrames and the assistant aggregator adds each reply to the context once.
    assistant = LLMAssistantAggregator(context)
    answered = asyncio.Event()

    @assistant.event_handler("on_assistant_turn_stopped")
    async def reply_recorded(_aggregator: LLMAssistantAggregator, _message: object) -> None:
        answered.set()

    pipeline = Pipeline([llm, tts, WavWriter(), assistant])
    worker = PipelineWorker(pipeline, params=PipelineParams(audio_out_sample_rate=SAMPLE_RATE), cancel_on_idle_timeout=False)
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    running = asyncio.create_task(runner.run())

    print("Ask something (an empty line ends):", flush=True)
    while line := (await asyncio.to_thread(sys.stdin.readline)).strip():
        context.add_message({"role": "user", "content": line})
        answered.clear()
        await worker.queue_frame(LLMContextFrame(context))
        await answered.wait()
    await worker.queue_frame(EndFrame())
    await running


if __name__ == "__main__":
    asyncio.run(main())
