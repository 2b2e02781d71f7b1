"""The speech server's faces, one module per wire protocol: each parses and formats, and keeps
its protocol's state. The faces whose text comes in contexts (Cartesia's, ElevenLabs' and
Deepgram's sockets) are protocol machines without I/O run by `voicestream.server.contexts`;
the session and Wyoming are connections of the edge; the HTTP routes (`/invocations`, OpenAI,
captioned speech, Cartesia's, Deepgram's and ElevenLabs' REST, the voice lists) answer one
request each over the same core."""
