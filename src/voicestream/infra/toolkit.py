"""Synthesis in-process, and the CDK CLI (npm `aws-cdk`) for what needs AWS.

The CLIs synthesize the app here (jsii runs node) into a cloud assembly directory and hand
that directory to `cdk deploy` / `cdk destroy`, so the CDK CLI never runs Python itself.
`--dry-run` stops after synthesis and prints each stack's resources.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

CDK_CLI_VERSION = "2.1148.1"
"""The npm aws-cdk release pinned here: it reads the cloud assembly schema of the locked
aws-cdk-lib (a CLI older than the library refuses the assembly)."""
CDK_CLI_DIR = Path(".cdk")
"""Where `npm install --prefix .cdk` puts the CLI (git-ignored), relative to the repository."""
CDK_CLI_ENV = "VOICESTREAM_CDK"
INSTALL_HINT = (
    f"install the CDK CLI (Node.js 20+):  npm install --prefix {CDK_CLI_DIR} aws-cdk@{CDK_CLI_VERSION}\n"
    f"(or set {CDK_CLI_ENV} to a cdk executable of version {CDK_CLI_VERSION} or newer)"
)

if TYPE_CHECKING:
    import aws_cdk as cdk

console = Console(stderr=True)


class CdkCliMissing(RuntimeError):
    """No CDK CLI found; the message says how to install it."""


@dataclass(frozen=True)
class Resource:
    stack: str
    logical_id: str
    type: str


def synthesize(build: Callable[[str], cdk.App], outdir: Path) -> list[Resource]:
    """Run `build(outdir)` (returns a cdk.App), synthesize it, and list every stack's resources."""
    outdir.mkdir(parents=True, exist_ok=True)
    with console.status("Synthesizing the CDK app (jsii starts node; this takes a little while)..."):
        assembly = build(str(outdir)).synth()
    return [
        Resource(stack.stack_name, logical_id, resource["Type"])
        for stack in assembly.stacks
        for logical_id, resource in stack.template.get("Resources", {}).items()
    ]


def print_resources(resources: list[Resource]) -> None:
    for stack in dict.fromkeys(r.stack for r in resources):
        typer.echo(f"{stack}:")
        for resource in (r for r in resources if r.stack == stack):
            typer.echo(f"  {resource.type:45} {resource.logical_id}")


def find_cdk(repo: Path) -> str:
    """The CDK CLI: $VOICESTREAM_CDK, the repository's .cdk install, else `cdk` on PATH."""
    candidates = [os.environ.get(CDK_CLI_ENV), str(repo / CDK_CLI_DIR / "node_modules" / ".bin" / "cdk"), shutil.which("cdk")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise CdkCliMissing(f"the CDK CLI (npm aws-cdk) is not installed; {INSTALL_HINT}")


def run_cdk(cdk: str, args: list[str], cwd: Path) -> int:
    """Run the CDK CLI in the foreground, printing the command first; returns its exit status."""
    command = [cdk, *args]
    console.print(f"$ {shlex.join(command)}", highlight=False)
    return subprocess.run(command, cwd=cwd, check=False).returncode


def require_cdk(repo: Path) -> str:
    """The CDK CLI, or print how to install it and exit 2."""
    try:
        return find_cdk(repo)
    except CdkCliMissing as error:
        console.print(f"[red]error:[/red] {error}", highlight=False)
        raise typer.Exit(2) from None
