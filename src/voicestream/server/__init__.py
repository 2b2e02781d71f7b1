"""The speech server: Starlette app, session scheduler, limits and metrics."""

from voicestream.server.app import create_app
from voicestream.server.runner import free_port, running_server, serve
from voicestream.server.settings import ServerSettings

__all__ = ["ServerSettings", "create_app", "free_port", "running_server", "serve"]
