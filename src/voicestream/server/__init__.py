"""The speech server: the Starlette app and its runner (`app`, `runner`), the faces
(`faces`: one module per wire protocol), the context runner that executes the socket faces'
protocol machines (`contexts`), the one send loop of the HTTP faces (`streaming`) and the
speech core's connection on the edge (`connection`).
The core itself is `voicestream.speech`; the edge, shared with the agent, `voicestream.edge`."""

from voicestream.server.app import create_app
from voicestream.server.runner import free_port, running_server, serve
from voicestream.speech.settings import ServerSettings

__all__ = ["ServerSettings", "create_app", "free_port", "running_server", "serve"]
