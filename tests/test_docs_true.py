"""The docs keep up with the code: every option of every command's ``--help`` is named in
README.md or docs/*.md, and every route the speech server and the agent mount is in
docs/PROTOCOL.md, in the section of the server that mounts it.

No model is loaded and no server is started: the help is rendered in process and the
routes are read from the app objects, whose models load only when they start.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from typer.core import TyperGroup
from typer.testing import CliRunner

from voicestream.cli import app as voicestream
from voicestream.infra.cli import agent_infra, speech_infra

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PROTOCOL = ROOT / "docs" / "PROTOCOL.md"
AGENT_SECTION = "\n## 2. Agent runtime"
SCRIPTS = {"voicestream": voicestream, "agent-infra": agent_infra, "speech-infra": speech_infra}
"""pyproject's [project.scripts]."""
OPTION = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*")
WIDE = {"COLUMNS": "1000", "TERMINAL_WIDTH": "1000", "NO_COLOR": "1"}
"""So that rich neither wraps nor cuts an option's name."""


def _commands(command: Any) -> Iterator[tuple[list[str], Any]]:
    """Every command under ``command`` (itself included), with the arguments that reach it
    (typer's own click classes, not the click package's)."""
    yield [], command
    if isinstance(command, TyperGroup):
        for name, sub in command.commands.items():
            for path, found in _commands(sub):
                yield [name, *path], found


def _declared(command: Any) -> set[str]:
    """The long option names ``command`` takes."""
    return {
        name
        for param in command.params
        if param.param_type_name == "option"
        for name in (*param.opts, *param.secondary_opts)
        if name.startswith("--")
    }


def _named(name: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def test_every_option_in_every_help_is_documented() -> None:
    docs = "\n".join(path.read_text(encoding="utf-8") for path in DOCS)
    runner = CliRunner()
    undocumented: list[str] = []
    unseen: list[str] = []
    helps = 0
    for script, app in SCRIPTS.items():
        for path, command in _commands(typer.main.get_command(app)):
            line = " ".join([script, *path])
            result = runner.invoke(app, [*path, "--help"], prog_name=script, env=WIDE)
            assert result.exit_code == 0, f"{line} --help failed:\n{result.output}"
            helps += 1
            shown = set(OPTION.findall(result.output))
            unseen += [f"{line}: {name}" for name in sorted(_declared(command) - shown)]
            undocumented += [f"{line}: {name}" for name in sorted(shown) if not _named(name, docs)]
    assert helps > 20, f"only {helps} commands found: the command tree was not walked"
    assert not unseen, "options missing from the rendered help (wrapped or cut?):\n" + "\n".join(unseen)
    assert not undocumented, (
        "options in --help that README.md and docs/*.md never name:\n" + "\n".join(undocumented)
    )


def _entries(routes: list[BaseRoute]) -> Iterator[str]:
    """Each route as PROTOCOL.md writes it: `GET /ping`, `WS /tts/websocket`, `/web/`."""
    for route in routes:
        if isinstance(route, WebSocketRoute):
            yield f"WS {route.path}"
        elif isinstance(route, Route):
            yield from (f"{method} {route.path}" for method in sorted((route.methods or set()) - {"HEAD"}))
        elif isinstance(route, Mount):
            yield f"{route.path}/"
        else:
            pytest.fail(f"a route of an unexpected kind: {route!r}")


def _speech_routes() -> list[BaseRoute]:
    from voicestream.server import ServerSettings
    from voicestream.server.app import create_app

    return create_app(ServerSettings()).routes


def _agent_routes() -> list[BaseRoute]:
    from voicestream.agent.app import AgentSettings, create_app

    return create_app(AgentSettings(speech_url="ws://127.0.0.1:9/invocations-bidirectional-stream")).routes


@pytest.mark.parametrize(
    ("server", "routes", "section"),
    [("speech server", _speech_routes, 0), ("agent", _agent_routes, 1)],
    ids=["speech-server", "agent"],
)
def test_every_mounted_route_is_in_protocol_md(
    server: str, routes: Callable[[], list[BaseRoute]], section: int
) -> None:
    sections = PROTOCOL.read_text(encoding="utf-8").split(AGENT_SECTION)
    assert len(sections) == 2, f"PROTOCOL.md has no {AGENT_SECTION.strip()!r} heading"
    entries = sorted(set(_entries(routes())))
    assert len(entries) >= 4, entries
    missing = [entry for entry in entries if f"`{entry}`" not in sections[section]]
    where = "section 1, speech server" if section == 0 else "section 2, agent runtime"
    assert not missing, f"routes the {server} mounts that PROTOCOL.md ({where}) never names:\n" + "\n".join(missing)
