"""The speech server's limits and their defaults, written once.

`voicestream.speech.settings.ServerSettings`, the scheduler's `Budgets` and the options of
`voicestream serve` all read them from here (docs/PROTOCOL.md 1.7 and docs/RELIABILITY.md
say what each bounds). This module imports nothing, so that ``voicestream --help`` stays fast
and works where the engine is not installed.
"""

HOST = "127.0.0.1"
"""Outside a container the server is reachable from this machine only; the container
entrypoint passes 0.0.0.0 explicitly."""
PORT = 8080
"""SageMaker's port."""
MAX_SESSIONS = 64
"""Open connections (sessions, Cartesia sockets, Wyoming connections) beyond this get ``busy``."""
MAX_QUEUE = 256
"""Requests accepted and not yet sent, all listeners together, beyond this get ``busy``."""
MAX_SESSION_REQUESTS = 32
"""Requests one session may have accepted and not yet sent (open contexts on a Cartesia socket)."""
LISTENER_BUDGET_BYTES = 2 * 1024 * 1024
"""Rendered, unsent audio one listener may hold before its next piece waits (about 44 s of pcm16)."""
BUFFER_BUDGET_BYTES = 64 * 1024 * 1024
"""Rendered, unsent audio of all listeners together; split evenly when short."""
MAX_SESSION_ERRORS = 4096
"""Bad messages in a row one connection may send; one more closes it."""
SEND_TIMEOUT_S = 60.0
"""How long one frame or HTTP body chunk may take to leave."""
SEND_BUFFER_BYTES = 131_072
"""The kernel send buffer of each accepted connection (Linux doubles it). Left to autotuning,
it grows to megabytes on a fast path (about 3 MB, a minute of pcm16, on loopback), and a peer
that stops reading is only noticed when that minute has been rendered; 128 KiB still fills a
100 ms round trip at over 1 MB/s, twenty times a 44.1 kHz wav stream."""
MAX_WHOLE_FILES = 8
"""``stream: false`` answers (``POST /invocations``, ``/dev/captioned_speech``) prepared at once."""
MAX_BODY_BYTES = 1_048_576
"""The largest HTTP body, WebSocket message or Wyoming event accepted."""
IDLE_TIMEOUT_S = 300.0
"""A connection with nothing received, nothing sent and nothing left to send for this long is closed."""
STALE_AFTER_S = 60.0
"""A request that waits this long on this server for its first piece is answered ``request_stale``."""
READY_TIMEOUT_S = 120.0
"""How long a request waits for the model to finish loading before it is refused."""
GRACE_S = 30.0
"""On SIGTERM: how long in-flight requests may take to finish."""
