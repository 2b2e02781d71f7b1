"""Server settings: one frozen object, filled from the CLI or the environment.

The defaults of the limits are `voicestream.limits`' (the scheduler's `Budgets` and
``voicestream serve``'s options read the same ones)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from voicestream import limits
from voicestream.engine.memory import DEFAULT_RELEASE_AFTER_S, DEFAULT_RENEW_ABOVE
from voicestream.engine.silence import DEFAULT_PAUSES, Pauses
from voicestream.engine.vocoder import FIRST_WINDOW_S
from voicestream.text.lexicon import Lexicon, LexiconError

DEFAULT_HOST = limits.HOST
"""Outside a container the server is reachable from this machine only; the container
entrypoint passes 0.0.0.0 explicitly."""

RELEASE_AFTER_ENV = "VOICESTREAM_RELEASE_AFTER_S"
RENEW_ABOVE_ENV = "VOICESTREAM_RENEW_ABOVE"


def _configured(name: str, default: float, unit: str) -> float:
    """A non-negative number from the environment variable ``name``; a value that is not a
    number is logged and ``default`` used (a typo must not stop the server)."""
    value = os.environ.get(name)
    if not value:
        return default
    try:
        return max(0.0, float(value))
    except ValueError:
        logging.getLogger(__name__).warning("%s=%r is not a %s; using %g", name, value, unit, default)
        return default


def read_lexicons(paths: tuple[Path, ...]) -> Lexicon:
    """The lexicons of ``paths`` as one, later files winning for a word both list (PLS or
    ``word<TAB>IPA``, `voicestream.text.lexicon`). Raises `LexiconError` naming the file."""
    lexicon = Lexicon()
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise LexiconError(f"{path}: cannot be read ({error})") from None
        lexicon = lexicon + Lexicon.from_text(text, str(path))
    return lexicon


@dataclass(frozen=True)
class ServerSettings:
    host: str = DEFAULT_HOST
    port: int = limits.PORT
    device: str = "cpu"
    model_dir: Path | None = None
    variant: str = "int8"
    pauses: Pauses = DEFAULT_PAUSES
    """The silence before a request's first sound and between sentences (``--leading-silence-ms``,
    ``--sentence-pause-ms``); the model's own padding is cut to these. They reach the engine
    this server loads; a server given a loaded engine (tests, benches) keeps that engine's."""
    release_after_s: float = field(
        default_factory=partial(_configured, RELEASE_AFTER_ENV, DEFAULT_RELEASE_AFTER_S, "number of seconds")
    )
    """Seconds without a model run before the engine hands malloc's free memory back to the
    system (``VOICESTREAM_RELEASE_AFTER_S``, 1 by default; 0 never): the idle release this
    server makes for the engine it loads (`voicestream.engine.memory.IdleRelease`)."""
    renew_above: float = field(default_factory=partial(_configured, RENEW_ABOVE_ENV, DEFAULT_RENEW_ABOVE, "ratio"))
    """The growth of the heap over its lowest after which a quiet spell builds again the model
    sessions that had runs at once (``VOICESTREAM_RENEW_ABOVE``, 1.1 by default; 0 never).
    Like the release's spell, it reaches the engine this server loads; a server given a loaded
    engine keeps that engine's release."""
    lexicons: tuple[Path, ...] = ()
    """Pronunciation lexicons (``--lexicon``, PLS or ``word<TAB>IPA``) applied to every text
    before its G2P. Like the pauses, they reach the engine this server loads."""
    dictionaries_dir: Path | None = None
    """Where uploaded pronunciation dictionaries are kept (`voicestream.speech.dictionaries`);
    None: ``pronunciation-dictionaries`` in the voicestream cache (``VOICESTREAM_CACHE``)."""
    first_window_s: float = FIRST_WINDOW_S
    """The first vocoder window of a piece whose listener would otherwise wait for it (a silent
    listener's first piece, or one due after its listener's audio runs out; ``--first-window-ms``,
    500 by default): its first audio waits for this much audio, not for the whole piece;
    0 renders every piece whole."""
    max_sessions: int = limits.MAX_SESSIONS
    """Open WebSocket sessions beyond this are answered ``busy`` and closed."""
    max_queue: int = limits.MAX_QUEUE
    """Requests waiting for synthesis (all sessions together) beyond this are answered ``busy``."""
    max_session_requests: int = limits.MAX_SESSION_REQUESTS
    """Requests one session may have accepted and not yet sent; beyond this, ``busy``. Each
    session also keeps ``max_queue // max_sessions`` slots of the queue in reserve."""
    listener_budget_bytes: int = limits.LISTENER_BUDGET_BYTES
    """Rendered, unsent audio one session or response may hold before its next piece waits
    (about 44 s of pcm16 at 24 kHz)."""
    buffer_budget_bytes: int = limits.BUFFER_BUDGET_BYTES
    """Rendered, unsent audio of all requests together; split evenly when it is short."""
    max_session_errors: int = limits.MAX_SESSION_ERRORS
    """Bad messages in a row one session may send; one more closes it with 1008."""
    send_timeout_s: float = limits.SEND_TIMEOUT_S
    """How long one frame or HTTP body chunk may take to leave; a client that reads nothing
    for this long is disconnected and its requests are dropped."""
    send_buffer_bytes: int = limits.SEND_BUFFER_BYTES
    """The kernel send buffer of each accepted connection (HTTP, WebSocket, Wyoming), so that
    ``send_timeout_s`` starts soon after a peer stops reading (``voicestream.limits``)."""
    max_whole_files: int = limits.MAX_WHOLE_FILES
    """``stream: false`` answers collected at once (``POST /invocations`` and ``/dev/captioned_speech``;
    each holds its whole file); beyond, ``busy``."""
    max_body_bytes: int = limits.MAX_BODY_BYTES
    """HTTP request bodies larger than this are refused with 413 ``payload_too_large``."""
    idle_timeout_s: float = limits.IDLE_TIMEOUT_S
    """A session with no message and no work for this long is closed."""
    stale_after_s: float = limits.STALE_AFTER_S
    """A request that waits this long on this server for its first piece (counted from when
    its session's earlier requests were rendered) is answered ``request_stale``."""
    ready_timeout_s: float = limits.READY_TIMEOUT_S
    """How long a request waits for the model to finish loading before it is refused."""
    grace_s: float = limits.GRACE_S
    """On SIGTERM: how long in-flight requests may take to finish before sessions are closed."""
    api_key: str | None = None
    """When set, every route but ``/ping`` and the page needs it (see ``voicestream.access``)."""
    cors_origins: tuple[str, ...] = ()
    """Browser origins allowed to call the server from another site; none by default."""
    allowed_hosts: tuple[str, ...] = ()
    """``Host`` names accepted beside localhost and the server's own address (``*``: any)."""
    wyoming_port: int | None = None
    """Also serve the Wyoming protocol (Home Assistant) on this TCP port, same host."""
    pipelined: bool = True
    """Accept a session's next message while earlier ones are still synthesizing and sending.

    False gives the reference design's strictly sequential session (receive, synthesize,
    send, then receive again), kept so that ``voicestream bench transport`` can measure
    what pipelining buys on the same server.
    """
