"""`python -m voicestream.agent`: the agent runtime as its container runs it on AgentCore.

Listens on 0.0.0.0:8080 (AgentCore's port; `PORT` overrides it), configured from the
environment (see `AgentSettings.from_env`).
"""

import os

from voicestream.agent.app import AgentSettings, serve_agent

if __name__ == "__main__":
    serve_agent(
        host=os.environ.get("HOST", "0.0.0.0"),
        port=int(os.environ.get("PORT", "8080")),
        settings=AgentSettings.from_env(),
    )
