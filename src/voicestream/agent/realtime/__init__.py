"""The agent as an OpenAI Realtime API endpoint (GA events): `WS /v1/realtime`, and the same
handler at AgentCore's `WS /ws`. See docs/PROTOCOL.md, the Realtime section."""

from voicestream.agent.realtime.socket import RealtimeSocket, serve_realtime

__all__ = ["RealtimeSocket", "serve_realtime"]
