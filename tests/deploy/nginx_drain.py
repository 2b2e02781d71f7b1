"""Measures what open-source nginx does with a draining replica (docs/DEPLOY.md, "nginx").

    uv run python -m tests.deploy.nginx_drain

Two real `voicestream serve` processes behind Debian's nginx (`least_conn`, passive checks
only: open-source nginx has no active health check). One session speaks a long answer; its
replica gets SIGTERM; then new sessions open through nginx one after another and stay open,
each speaking one sentence. It prints how many were refused `busy` by the draining replica
(its own `voicestream_errors_total{code="busy"}`) and how many the other one answered.
A measurement, not a test: how many land on the draining replica depends on how long it
keeps draining, which depends on the machine's speed.
"""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.deploy.balancer import Replica, replicas, require, wait_for

from voicestream.client import SpeechSession
from voicestream.client.errors import SpeechBusyError, SpeechError
from voicestream.client.events import AudioChunk, SpeechCompleted, SpeechFailed
from voicestream.engine.weights import resolve_weights
from voicestream.server import free_port

NEWCOMERS = 6
LONG_ANSWER = " ".join(f"Sentence {n} is spoken while the replica drains." for n in range(1, 9))
NGINX_CONFIG = """\
daemon off;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log warn;
events {{}}
http {{
    access_log off;
    client_body_temp_path {workdir}/body;
    proxy_temp_path {workdir}/proxy;
    upstream replicas {{
        least_conn;
{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://replicas;
            proxy_http_version 1.1;
            proxy_set_header Host $host;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection "upgrade";
            proxy_read_timeout 3600s;
        }}
    }}
}}
"""


async def outcome(url: str, held: list[SpeechSession]) -> str:
    try:
        session = await SpeechSession.connect(url)
    except SpeechError as error:
        return f"connect failed: {error}"
    try:
        request_id = await session.submit("A new session while one replica drains.")
    except (SpeechError, KeyError):
        # Refused and closed before the request went out. KeyError: SpeechSession.submit on a
        # session that its reader already failed forgets the request twice (a client bug).
        return "busy"
    try:
        async for event in session.events():
            if isinstance(event, SpeechFailed):
                return "busy" if isinstance(event.error, SpeechBusyError) else f"failed: {event.error}"
            if isinstance(event, SpeechCompleted) and event.request_id == request_id:
                held.append(session)
                return "answered"
    except SpeechBusyError:
        return "busy"
    except SpeechError as error:
        return f"failed: {error}"
    return "closed"


@contextmanager
def nginx(backends: list[Replica], workdir: Path) -> Iterator[str]:
    """Debian's nginx in front of the replicas; yields its WebSocket base URL."""
    binary = require("nginx", "apt-get install nginx")
    port = free_port()
    servers = "\n".join(f"        server 127.0.0.1:{r.port} max_fails=1 fail_timeout=10s;" for r in backends)
    config = workdir / "nginx.conf"
    config.write_text(NGINX_CONFIG.format(workdir=workdir, port=port, servers=servers))
    process = subprocess.Popen([binary, "-c", str(config), "-p", str(workdir)])
    try:
        wait_for(lambda: (workdir / "nginx.pid").exists(), 10, "nginx did not start")
        yield f"ws://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


async def measure(url: str, a: Replica, b: Replica) -> None:
    speaking = await SpeechSession.connect(url)
    await speaking.submit(LONG_ANSWER)
    events = speaking.events()
    async for event in events:
        if isinstance(event, AudioChunk):
            break
    draining, other = (a, b) if a.metric("voicestream_active_sessions") == 1 else (b, a)
    draining.sigterm()
    await asyncio.sleep(0.5)
    held: list[SpeechSession] = []
    outcomes = [await outcome(url, held) for _ in range(NEWCOMERS)]
    refused = draining.metric("voicestream_errors_total") if draining.process.poll() is None else None
    print(f"nginx least_conn, {NEWCOMERS} new sessions while one replica drains: {outcomes}")
    print(f"busy answers counted by the draining replica: {refused}; "
          f"sessions open on the other: {other.metric('voicestream_active_sessions'):.0f}")
    try:
        async for event in events:
            if isinstance(event, SpeechCompleted):
                print(f"the long answer: complete, {event.total_duration_s:.1f} s of audio")
                break
    except SpeechError as error:
        print(f"the long answer: {error} (longer than --grace-s on this machine)")
    for session in [*held, speaking]:
        await session.close()


if __name__ == "__main__":
    with (
        tempfile.TemporaryDirectory() as tmp,
        replicas(["a", "b"], resolve_weights().model_path.parent) as fleet,
        nginx(fleet, Path(tmp)) as url,
    ):
        asyncio.run(measure(url, *fleet))
