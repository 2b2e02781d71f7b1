"""Real parts for the load-balancer tests: `voicestream serve` processes and Debian's haproxy
on 127.0.0.1, each asked about its own state (the servers' /metrics, haproxy's stats socket).
"""

from __future__ import annotations

import csv
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from tests.deploy.chart import absent
from tests.server.wire import loopback_tls

from voicestream.server import free_port


def require(command: str, installed_by: str) -> str:
    """The command's path (Debian puts daemons in /usr/sbin)."""
    found = shutil.which(command) or shutil.which(command, path="/usr/sbin:/sbin")
    if found is None:
        absent(command, installed_by)
    return found


@dataclass
class Replica:
    """One `voicestream serve` process, as a pod runs it."""

    name: str
    process: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def metric(self, name: str) -> float:
        """A sample from the server's own /metrics (summed over labels)."""
        text = httpx.get(f"{self.url}/metrics", timeout=5, verify=loopback_tls()).text
        return sum(
            float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith(name) and line[len(name)] in " {"
        )

    def sigterm(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    def sigkill(self) -> None:
        """A crash: no drain, no close frame; the balancer finds out from its health check."""
        self.process.send_signal(signal.SIGKILL)


@contextmanager
def replicas(names: list[str], model_dir: Path, grace_s: float = 60) -> Iterator[list[Replica]]:
    """Start the servers together (model loads overlap) and yield them once /ping says 200."""
    started: list[Replica] = []
    try:
        for name in names:
            port = free_port()
            process = subprocess.Popen(
                [sys.executable, "-m", "voicestream.cli", "serve", "--port", str(port), "--grace-s", str(grace_s),
                 "--model-dir", str(model_dir), "--log-level", "warning"],
                env={**os.environ, "VOICESTREAM_OFFLINE": "1"},
            )
            started.append(Replica(name, process, port))
        for replica in started:
            wait_for(lambda r=replica: _ready(r), 120, f"{replica.name} did not become ready")
        yield started
    finally:
        for replica in started:
            if replica.process.poll() is None:
                replica.process.kill()
            replica.process.wait(10)


def _ready(replica: Replica) -> bool:
    assert replica.process.poll() is None, f"{replica.name} exited while starting"
    try:
        return httpx.get(f"{replica.url}/ping", timeout=1, verify=loopback_tls()).status_code == 200
    except httpx.TransportError:
        return False


def wait_for(condition, timeout: float, message: str) -> None:
    """Poll a deterministic condition; the timeout is a generous upper bound only."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, message
        time.sleep(0.1)


HAPROXY_CONFIG = """\
global
    stats socket {socket} mode 600 level admin
    maxconn 200

defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    # An upgraded WebSocket is a tunnel: it may stay quiet between sentences.
    timeout tunnel 1h

frontend speech
    bind 127.0.0.1:{port}
    default_backend replicas

backend replicas
    # A new session goes to the replica with the fewest open connections (sessions).
    balance leastconn
    # /ping answers 503 while a replica loads or drains: it is then taken out.
    option httpchk GET /ping
    http-check expect status 200
    default-server inter 200ms fall 1 rise 2
{servers}
"""


@dataclass
class Haproxy:
    process: subprocess.Popen[bytes]
    port: int
    socket_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stats(self) -> dict[str, dict[str, str]]:
        """`show stat` on the stats socket: the backend's servers by name (status, scur...)."""
        with socket.socket(socket.AF_UNIX) as stats:
            stats.settimeout(5)
            stats.connect(str(self.socket_path))
            stats.sendall(b"show stat\n")
            data = b""
            while chunk := stats.recv(65536):
                data += chunk
        rows = csv.DictReader(data.decode().lstrip("# ").splitlines())
        return {row["svname"]: row for row in rows if row["pxname"] == "replicas" and row["svname"] != "BACKEND"}

    def status(self, server: str) -> str:
        return self.stats()[server]["status"]


@contextmanager
def haproxy(backends: list[Replica], workdir: Path) -> Iterator[Haproxy]:
    binary = require("haproxy", "apt-get install haproxy")
    port = free_port()
    socket_path = workdir / "haproxy.sock"
    servers = "\n".join(f"    server {r.name} 127.0.0.1:{r.port} check" for r in backends)
    config = workdir / "haproxy.cfg"
    config.write_text(HAPROXY_CONFIG.format(socket=socket_path, port=port, servers=servers))
    check = subprocess.run([binary, "-c", "-f", str(config)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    process = subprocess.Popen([binary, "-db", "-f", str(config)], stdout=subprocess.DEVNULL)
    balancer = Haproxy(process, port, socket_path)
    try:
        wait_for(lambda: socket_path.exists(), 10, "haproxy did not start")
        wait_for(lambda: all(balancer.status(r.name) == "UP" for r in backends), 20, "replicas not UP in haproxy")
        yield balancer
    finally:
        process.terminate()
        process.wait(10)
