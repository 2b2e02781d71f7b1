"""The agent as an OpenAI Realtime API endpoint (GA events): `WS /v1/realtime`, and the same
handler at AgentCore's `WS /ws`. See docs/PROTOCOL.md, the Realtime section."""

from voicestream.agent.realtime.socket import serve_realtime

__all__ = ["serve_realtime"]
