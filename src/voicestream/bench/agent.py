"""``voicestream bench agent``: bidi against batch and batch-stream, end to end on this machine.

A real speech server and the agent with the local LLM run on 127.0.0.1; the same prompt
goes through each mode (``voicestream.agent.compare``), so the table shows what each part
of the pipeline buys and how far bidi's first audio is from its lower bound.
"""

from __future__ import annotations

import asyncio
import logging

from voicestream.bench.texts import AGENT_PROMPT
from voicestream.engine import KokoroEngine
from voicestream.server import running_server


def measure_agent(engine: KokoroEngine, prompt: str = AGENT_PROMPT, trials: int = 2) -> str:
    from voicestream.agent.app import AgentSettings, create_app, running_agent
    from voicestream.agent.compare import compare, format_table

    logging.getLogger("bedrock_agentcore").setLevel(logging.WARNING)
    with running_server(engine) as speech_url:
        app = create_app(AgentSettings(speech_url=speech_url, llm="local"))
        with running_agent(app) as agent_url:
            results = asyncio.run(compare(agent_url, prompt, trials=trials))
    return f"prompt: {prompt!r}, {trials} trials per mode, local LLM (SmolLM2-135M-Instruct)\n\n{format_table(results)}"
