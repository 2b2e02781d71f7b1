"""``agent-infra``: operate the agent runtime. ``demo`` compares the modes of a running agent.

The CDK stacks (``deploy``, ``destroy``) are not written yet; ``demo`` already works against
any agent URL (``voicestream agent``, a container) or a deployed AgentCore runtime ARN.
"""

from __future__ import annotations

from typing import Annotated

import typer

agent_infra = typer.Typer(help="Operate the voicestream agent runtime.", no_args_is_help=True, add_completion=False)


@agent_infra.callback()
def _group() -> None:
    """Operate the voicestream agent runtime."""


@agent_infra.command()
def demo(
    endpoint_url: Annotated[
        str, typer.Option("--endpoint-url", help="The agent's base URL, or an AgentCore runtime ARN.")
    ],
    prompt: Annotated[str, typer.Option(help="The same prompt for every mode.")],
    trials: Annotated[int, typer.Option(min=1, help="Answers per mode.")] = 1,
) -> None:
    """Run one prompt through bidi, batch and batch-stream and print time to first audio."""
    from voicestream.cli.agent_commands import print_comparison

    print_comparison(endpoint_url, prompt, trials, ["bidi", "batch", "batch-stream"])
