# The voicestream agent as an Amazon Bedrock AgentCore runtime.
#
# AgentCore runs arm64 (Graviton) containers and talks to them on port 8080:
# POST /invocations answers with Server-Sent Events (PROTOCOL.md section 2), GET /ping with
# {"status":"Healthy"}, WS /ws speaks the OpenAI Realtime API (AgentCore's WebSocket contract;
# nothing more to install: voice input there needs `asr`, left out). It installs the `agent` extra only: no speech engine (no onnxruntime,
# no espeak, no Kokoro weights), no local LLM, no voice input (`asr`: audio requests get
# `asr_unavailable`). It answers with a Bedrock model (or an OpenAI-compatible server) and
# speaks through the speech server's SageMaker endpoint (the `aws` extra, part of `agent`).
#
# Build from the repository root:
#   docker build --platform linux/arm64 -f docker/agent.Dockerfile -t voicestream-agent .
# Configure at run time (agent-infra sets these on the runtime):
#   VOICESTREAM_SPEECH_URL=sagemaker://ENDPOINT_NAME   (or ws://host:8080 for a plain server)
#   VOICESTREAM_LLM_MODEL=<Bedrock model id>            AWS_REGION=<region>
# Any Host name is accepted (VOICESTREAM_ALLOWED_HOSTS=*): AgentCore reaches the container
# by a name it cannot know; docker/compose.yaml narrows it to the local names.

FROM --platform=linux/arm64 python:3.12-slim AS build
RUN pip install --no-cache-dir uv==0.13.9
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/app/.venv
WORKDIR /src
# Dependencies first, in their own layer: a change to the code does not reinstall them.
# uv.lock is made here from pyproject.toml's pinned versions (not kept in git).
COPY pyproject.toml README.md ./
RUN --mount=type=cache,target=/root/.cache/uv \
    uv lock && uv sync --frozen --no-dev --extra agent --no-install-project
COPY src ./src
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --extra agent --no-editable

FROM --platform=linux/arm64 python:3.12-slim
RUN useradd --system --uid 10001 --user-group --home-dir /app --no-create-home agent
COPY --from=build --chown=agent:agent /app/.venv /app/.venv
ENV PATH=/app/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    VOICESTREAM_LLM=bedrock \
    VOICESTREAM_ALLOWED_HOSTS=* \
    HOST=0.0.0.0 \
    PORT=8080
WORKDIR /app
USER agent
EXPOSE 8080
CMD ["python", "-m", "voicestream.agent"]
