"""The speech server's faces, one module per wire protocol. A face only parses, formats and
keeps its protocol's state; lifecycle, budgets, errors, text and word times come from the core
(`voicestream.speech`), and everything that does I/O is shared:

- a socket face (the session, Cartesia's, Deepgram's and ElevenLabs' sockets, Wyoming) is a
  **protocol machine without I/O** (a client message in, commands out; the core's events in,
  frames out; its states an explicit enum) and a route that hands it to the one context runner
  (`voicestream.server.contexts.ContextConnection.serve_face`) on the one edge
  (`voicestream.edge.connection`);
- an HTTP face (``/invocations``, OpenAI, captioned speech, Cartesia's, Deepgram's and
  ElevenLabs' REST routes) is a parser and the formatting of its body's pieces, run by the one
  send loop of `voicestream.server.streaming`; the voice lists are `discovery`.

Adding a face means a machine (or a body's formatting) and a route, nothing else."""
