"""Clients of the speech server: persistent sessions and the one-shot `POST /invocations`.

`SpeechSession` speaks many sentences over one connection, straight to the server
(`WebSocketTransport`) or through a SageMaker endpoint (`SageMakerTransport`, which needs
the `aws` extra and is imported only when first used). `SyncSpeechSession` is the same for
code that is not async. `InvocationsClient` / `AsyncInvocationsClient` read
`POST /invocations`. Every failure is a `SpeechError`. `AgentClient` / `AsyncAgentClient`
ask the agent runtime and read its typed events with the caller's timings.

Each protocol's logic is a sans-I/O core (frames or bytes in, events out: `SessionProtocol`,
`InvocationsEventReader`, `AgentEventReader`) under thin async and sync shells with the same
parameters, as h11 sits under httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from voicestream.client.agent import (
    AgentAnswer,
    AgentClient,
    AgentEventReader,
    AsyncAgentClient,
    ReceivedEvent,
)
from voicestream.client.errors import (
    AgentClientError,
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
    WordTimes,
)
from voicestream.client.invocations import (
    AsyncInvocationsClient,
    InvocationsClient,
    InvocationsEventReader,
    SSEItem,
)
from voicestream.client.resume import ResumePolicy
from voicestream.client.session import SpeechSession
from voicestream.client.session_protocol import (
    RequestState,
    SessionOptions,
    SessionProtocol,
    SessionState,
)
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
    "AgentEventReader",
    "AsyncAgentClient",
    "AsyncInvocationsClient",
    "AudioChunk",
    "AudioFrame",
    "ConnectionLostError",
    "ControlFrame",
    "Frame",
    "InvalidRequestError",
    "InvocationsClient",
    "InvocationsEventReader",
    "ReceivedEvent",
    "RequestStaleError",
    "RequestState",
    "ResumePolicy",
    "SSEItem",
    "SageMakerTransport",
    "ServerError",
    "SessionOptions",
    "SessionProtocol",
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
    "WordTimes",
    "error_from_frame",
    "error_from_http",
]
