"""``agent-infra demo --realtime``: one OpenAI Realtime turn over the agent's ``/ws``.

A deployed runtime's ``/ws`` is AgentCore's data-plane URL for the runtime, signed with SigV4
in its query string (a presigned URL, built by the ``bedrock-agentcore`` package's
``AgentCoreRuntimeClient``): the one way a caller that cannot set handshake headers (a
browser) reaches it with IAM. AgentCore routes the connection by the runtime session id,
which a presigned URL carries as the query parameter
``X-Amzn-Bedrock-AgentCore-Runtime-Session-Id``, inside the signature; AgentCore hands it to
the container as the header of that name, which keys the conversation as on ``/invocations``.
An agent on this machine (a base URL) is reached at ``ws://host/ws`` with that header and
its API key as ``Authorization: Bearer``, the way the other clients send them.

The turn is text in, audio out: ``session.update`` (manual turns, pcm16 at 24 kHz),
``conversation.item.create`` with the prompt, ``response.create``, then the answer's
``response.output_audio.delta`` and ``response.output_audio_transcript.delta`` events until
``response.done``.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from voicestream.client.transport import bearer
from voicestream.protocol import SESSION_HEADER

if TYPE_CHECKING:
    import boto3

REALTIME_PATH = "/ws"
"""AgentCore's WebSocket contract: port 8080, path ``/ws`` (the agent also serves ``/v1/realtime``)."""
PRESIGN_EXPIRES_S = 300
"""The longest a presigned URL may live (AgentCore's and the package's limit)."""
SAMPLE_RATE = 24000
MAX_FRAME_BYTES = 16 * 1024 * 1024
"""A bound on one received event: an audio delta is a fraction of a second of base64 pcm16."""


class RealtimeDemoError(Exception):
    """The turn could not be spoken: the agent refused, sent an ``error`` event, or went away."""


@dataclass(frozen=True)
class RealtimeTarget:
    """Where the socket goes and the handshake headers it sends."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)


def presigned_url(
    runtime_arn: str, session_id: str, *, session: boto3.Session | None = None, expires_s: int = PRESIGN_EXPIRES_S
) -> str:
    """A ``wss://`` URL of the runtime's ``/ws``, SigV4-signed in its query with `session`'s
    credentials (the default chain's without one), in the ARN's region, for `session_id`."""
    from bedrock_agentcore.runtime import AgentCoreRuntimeClient

    region = runtime_arn.split(":")[3]
    client = AgentCoreRuntimeClient(region, session=session)
    return client.generate_presigned_url(runtime_arn, session_id=session_id, expires=expires_s)


def realtime_target(endpoint: str, session_id: str, api_key: str | None = None) -> RealtimeTarget:
    """The runtime ARN's presigned URL, or a base URL's ``/ws`` with the session and key headers."""
    if endpoint.startswith("arn:"):
        return RealtimeTarget(presigned_url(endpoint, session_id))
    parts = urlsplit(endpoint)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    url = urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + REALTIME_PATH, "", ""))
    return RealtimeTarget(url, {SESSION_HEADER: session_id, **bearer(api_key)})


@dataclass
class RealtimeTurn:
    """One answer as the caller received it; times on the caller's clock from the request."""

    transcript: str = ""
    audio: bytearray = field(default_factory=bytearray)
    status: str | None = None
    first_audio_s: float | None = None
    total_s: float = 0.0

    @property
    def audio_seconds(self) -> float:
        return len(self.audio) / 2 / SAMPLE_RATE


def turn_events(prompt: str, voice: str) -> list[dict[str, Any]]:
    """The client events of one text turn (GA names and shapes)."""
    audio_format = {"type": "audio/pcm", "rate": SAMPLE_RATE}
    session = {
        "type": "realtime",
        "output_modalities": ["audio"],
        "audio": {"input": {"turn_detection": None}, "output": {"format": audio_format, "voice": voice}},
    }
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}
    return [
        {"type": "session.update", "session": session},
        {"type": "conversation.item.create", "item": item},
        {"type": "response.create"},
    ]


async def speak_turn(target: RealtimeTarget, prompt: str, voice: str, timeout_s: float) -> RealtimeTurn:
    """Ask `prompt` and collect the spoken answer, within `timeout_s` for the whole turn."""
    import asyncio

    import websockets

    turn = RealtimeTurn()
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            async with websockets.connect(
                target.url, additional_headers=target.headers, max_size=MAX_FRAME_BYTES
            ) as socket:
                for event in turn_events(prompt, voice):
                    await socket.send(json.dumps(event))
                async for frame in socket:
                    if _received(json.loads(frame), turn, started):
                        break
    except TimeoutError:
        raise RealtimeDemoError(f"no complete answer within {timeout_s:g} s") from None
    except (OSError, websockets.WebSocketException) as error:
        raise RealtimeDemoError(f"cannot reach {urlsplit(target.url).netloc}: {error}") from error
    if turn.status is None:
        raise RealtimeDemoError("the socket closed before response.done")
    turn.total_s = time.perf_counter() - started
    return turn


def _received(event: dict[str, Any], turn: RealtimeTurn, started: float) -> bool:
    """Fold one server event into `turn`; True at the answer's end."""
    kind = event.get("type")
    if kind == "error":
        error = event.get("error", {})
        raise RealtimeDemoError(f"{error.get('code') or error.get('type')}: {error.get('message')}")
    if kind == "response.output_audio.delta":
        if turn.first_audio_s is None:
            turn.first_audio_s = time.perf_counter() - started
        turn.audio += base64.b64decode(event["delta"])
    elif kind == "response.output_audio_transcript.delta":
        turn.transcript += event["delta"]
    elif kind == "response.done":
        turn.status = event["response"]["status"]
        return True
    return False
