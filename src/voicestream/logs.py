"""One logging setup for every long-running command (the speech server and the agent).

Plain text for people by default; ``json=True`` writes one JSON object per line for log
collectors (CloudWatch, Loki...), with the traceback and the request id as fields. Code
that logs a request's failure passes ``extra={"request_id": ...}`` so that both forms
carry it.
"""

from __future__ import annotations

import json as jsonlib
import logging
import sys
import time
from typing import Any

LEVELS = ("debug", "info", "warning", "error", "critical")
_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s%(request)s: %(message)s"


class _RequestIdText(logging.Formatter):
    """The text form: `[request r1]` after the logger name when the record has an id."""

    def format(self, record: logging.LogRecord) -> str:
        request_id = getattr(record, "request_id", None)
        record.request = f" [request {request_id}]" if request_id else ""
        return super().format(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, request_id, exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id:
            entry["request_id"] = request_id
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return jsonlib.dumps(entry, ensure_ascii=False)


def configure_logging(level: str = "info", json: bool = False) -> None:
    """Send every logger (ours, uvicorn's, the libraries') to stderr in one format."""
    if level.lower() not in LEVELS:
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LEVELS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json else _RequestIdText(_TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True



def quiet_agentcore_logs() -> None:
    """Keep Bedrock AgentCore's per-request INFO lines out of a demo's or a bench's output.

    `BedrockAgentCoreApp` gives its logger a handler and the INFO level when it is built,
    unless the logger has a handler already: a null handler first, then WARNING, stick."""
    logger = logging.getLogger("bedrock_agentcore.app")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    logger.setLevel(logging.WARNING)
