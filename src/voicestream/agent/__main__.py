"""`python -m voicestream.agent`: the agent runtime as its container runs it on AgentCore.

Listens on 0.0.0.0:8080 (AgentCore's port; `PORT` overrides it), configured from the
environment (see `AgentSettings.from_env`); logs as VOICESTREAM_LOG_LEVEL (info) says, one
JSON object per line when VOICESTREAM_LOG_JSON=1.
"""

import os

from voicestream.agent.app import AgentSettings, serve_agent
from voicestream.logs import configure_logging

if __name__ == "__main__":
    configure_logging(
        os.environ.get("VOICESTREAM_LOG_LEVEL", "info"),
        json=os.environ.get("VOICESTREAM_LOG_JSON", "") in ("1", "true"),
    )
    serve_agent(
        host=os.environ.get("HOST", "0.0.0.0"),
        port=int(os.environ.get("PORT", "8080")),
        settings=AgentSettings.from_env(),
    )
