"""LiveKit Agents' own plugins speaking through voicestream, with no cloud account.

The LLM is ``livekit.plugins.openai.LLM`` on any OpenAI-compatible server (the local
demo's SmolLM2 served by llama.cpp, Ollama, vLLM...); the voice is
``livekit.plugins.cartesia.TTS`` pointed at voicestream's Cartesia-compatible routes.
The LLM's tokens are pushed into the TTS stream as they arrive, so voicestream starts
speaking the first words while the answer is still being written. Questions are typed,
one per line; each answer is written to ``answer-N.wav``.

In an ``AgentSession`` (a LiveKit room, ``console`` mode) the same two lines do it:
``llm=openai.LLM(base_url=...)`` and ``tts=cartesia.TTS(base_url="http://127.0.0.1:8080",
api_key="unused", voice="af_heart")``.

    uv run voicestream serve                                     # speech on :8080
    uv run --with 'llama-cpp-python[server]' python -m llama_cpp.server \\
        --model "$(uv run python -c 'from voicestream.agent.local_llm import default_model_path as p; print(p())')" \\
        --port 8000                                              # the demo's LLM, OpenAI-compatible
    uv run python examples/livekit_agent.py --llm-url http://127.0.0.1:8000/v1

docs/INTEGRATIONS.md lists the settings.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import wave

import aiohttp
from livekit.agents import llm as lk_llm
from livekit.plugins import cartesia, openai

SAMPLE_RATE = 24000


async def answer(model: openai.LLM, tts: cartesia.TTS, chat: lk_llm.ChatContext, path: str) -> str:
    """Stream one reply from the LLM into the TTS; write its audio to ``path``; return its text."""
    speech = tts.stream()
    reply: list[str] = []
    started = time.monotonic()

    async def write_tokens() -> None:
        async with model.chat(chat_ctx=chat) as tokens:
            async for chunk in tokens:
                if chunk.delta and chunk.delta.content:
                    reply.append(chunk.delta.content)
                    speech.push_text(chunk.delta.content)
        speech.end_input()

    writing = asyncio.create_task(write_tokens())
    with wave.open(path, "wb") as out:
        out.setparams((1, 2, SAMPLE_RATE, 0, "NONE", "not compressed"))
        async for event in speech:
            if out.getnframes() == 0:
                print(f"  first audio after {time.monotonic() - started:.2f} s", flush=True)
            out.writeframes(bytes(event.frame.data))
    await writing
    await speech.aclose()
    return "".join(reply)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--speech-url", default="http://127.0.0.1:8080")
    parser.add_argument("--llm-url", default="http://127.0.0.1:8000/v1", help="an OpenAI-compatible base URL")
    parser.add_argument("--model", default="smollm2", help="the model name the LLM server expects")
    parser.add_argument("--voice", default="af_heart", help="a Kokoro voice or blend")
    parser.add_argument("--api-key", default="unused", help="voicestream's --api-key, if it has one")
    args = parser.parse_args()

    chat = lk_llm.ChatContext()
    chat.add_message(role="system", content="You are a helpful voice assistant. Answer in two sentences.")
    async with aiohttp.ClientSession() as session:
        model = openai.LLM(model=args.model, base_url=args.llm_url, api_key="unused")
        tts = cartesia.TTS(base_url=args.speech_url, api_key=args.api_key, voice=args.voice,
                           sample_rate=SAMPLE_RATE, http_session=session)
        print("Ask something (an empty line ends):", flush=True)
        count = 0
        while line := (await asyncio.to_thread(sys.stdin.readline)).strip():
            count += 1
            chat.add_message(role="user", content=line)
            reply = await answer(model, tts, chat, f"answer-{count}.wav")
            chat.add_message(role="assistant", content=reply)
            print(f"  -> answer-{count}.wav: {reply}", flush=True)
        await tts.aclose()
        await model.aclose()


if __name__ == "__main__":
    asyncio.run(main())
