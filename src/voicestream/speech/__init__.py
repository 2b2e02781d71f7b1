"""The speech core: one typed entry (`core.SpeechCore.start`, taking `Voice` and `Output`),
the request lifecycle (`job`), the scheduler that owns every budget (`scheduler`) and its
policy (`policy`, a pure function of each listener's slack), pacing (`pace`), text streamed
into requests (`streamed`), the server's settings and metrics. It knows no wire: the faces
(`voicestream.server.faces`) and the edge (`voicestream.edge`) sit above it."""
