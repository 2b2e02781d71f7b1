"""Clients of the speech server: persistent sessions and the one-shot `POST /invocations`.

`SpeechSession` speaks many sentences over one connection, straight to the server
(`WebSocketTransport`) or through a SageMaker endpoint (`SageMakerTransport`, which needs
the `aws` extra and is imported only when first used). `SyncSpeechSession` is the same for
code that is not async. `InvocationsClient` / `AsyncInvocationsClient` read
`POST /invocations`. Every failure is a `SpeechError`. `AgentClient` / `AsyncAgentClient`
ask the agent runtime and read its typed events with the caller's timings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from voicestream.client.agent import (
    AgentAnswer,
    AgentClient,
    AgentClientError,
    AsyncAgentClient,
    ReceivedEvent,
)
from voicestream.client.errors import (
    ConnectionLostError,
    InvalidRequestError,
    RequestStaleError,
    ServerError,
    SpeechBusyError,
    SpeechError,
    SpeechTimeoutError,
    error_from_frame,
    error_from_http,
)
from voicestream.client.events import (
    AudioChunk,
    SpeechCancelled,
    SpeechCompleted,
    SpeechEvent,
    SpeechFailed,
    SpeechStarted,
)
from voicestream.client.invocations import AsyncInvocationsClient, InvocationsClient, SSEItem
from voicestream.client.resume import ResumePolicy
from voicestream.client.session import RequestState, SessionState, SpeechSession
from voicestream.client.sync import SyncSpeechSession
from voicestream.client.transport import AudioFrame, ControlFrame, Frame, Transport
from voicestream.client.websocket import WebSocketTransport

if TYPE_CHECKING:
    from voicestream.client.sagemaker import SageMakerTransport


def __getattr__(name: str) -> Any:
    """`SageMakerTransport` on first use, so that the rest works without the AWS SDK."""
    if name == "SageMakerTransport":
        from voicestream.client.sagemaker import SageMakerTransport

        return SageMakerTransport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AgentAnswer",
    "AgentClient",
    "AgentClientError",
    "AsyncAgentClient",
    "AsyncInvocationsClient",
    "AudioChunk",
    "AudioFrame",
    "ConnectionLostError",
    "ControlFrame",
    "Frame",
    "InvalidRequestError",
    "InvocationsClient",
    "ReceivedEvent",
    "RequestStaleError",
    "RequestState",
    "ResumePolicy",
    "SSEItem",
    "SageMakerTransport",
    "ServerError",
    "SessionState",
    "SpeechBusyError",
    "SpeechCancelled",
    "SpeechCompleted",
    "SpeechError",
    "SpeechEvent",
    "SpeechFailed",
    "SpeechSession",
    "SpeechStarted",
    "SpeechTimeoutError",
    "SyncSpeechSession",
    "Transport",
    "WebSocketTransport",
    "error_from_frame",
    "error_from_http",
]
