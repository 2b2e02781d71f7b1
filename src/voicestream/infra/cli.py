"""``speech-infra`` and ``agent-infra``: deploy, inspect and remove the AWS deployment.

``deploy`` and ``destroy`` synthesize the CDK app here and run the CDK CLI on it (printing
the command); ``--dry-run`` only synthesizes, offline, and lists the resources. ``status``
asks AWS through boto3. CDK and boto3 are imported inside the commands: ``--help`` and
``agent-infra demo`` start without them.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from voicestream.infra.config import (
    AGENT_RUNTIME_NAME,
    AGENT_STACK,
    FOUNDATION_STACK,
    SPEECH_MODELS,
    AgentDeployment,
    ConfigError,
    SpeechDeployment,
    default_target_sessions,
    endpoint_name,
    endpoint_stack_name,
    image_flavor,
)

if TYPE_CHECKING:
    import aws_cdk as cdk

    from voicestream.infra.toolkit import Resource

speech_infra = typer.Typer(
    help="Deploy the speech server as a SageMaker endpoint (CDK v2).", no_args_is_help=True, add_completion=False
)
agent_infra = typer.Typer(
    help="Deploy and operate the voicestream agent on Bedrock AgentCore (CDK v2).",
    no_args_is_help=True,
    add_completion=False,
)

Model = Annotated[str, typer.Argument(help=f"The speech model: {', '.join(SPEECH_MODELS)}.")]
DryRun = Annotated[
    bool, typer.Option("--dry-run", help="Synthesize offline and list the resources; deploy nothing.")
]
ImageUri = Annotated[
    str | None, typer.Option("--image-uri", help="An ECR image to run instead of building the Dockerfile.")
]
Yes = Annotated[
    bool,
    typer.Option("--yes", help="Do not ask before IAM or security-group changes (`cdk deploy --require-approval never`)."),
]
Region = Annotated[str | None, typer.Option("--region", help="AWS region (default: your AWS configuration's).")]
DEFAULT_SPEECH_ENDPOINT = endpoint_name(SPEECH_MODELS[0])
DESTROY_ONLY_MODEL_ID = "destroy-only"


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[3]


def _fail(message: str) -> typer.Exit:
    from voicestream.infra.toolkit import console

    console.print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(2)


def _synth_and_run(build: Callable[[str], cdk.App], name: str, dry_run: bool, cdk_args: list[str]) -> None:
    """Synthesize; on a dry run list the resources, else run `cdk <cdk_args> --app <assembly>`."""
    from voicestream.infra.toolkit import print_resources, require_cdk, run_cdk

    if dry_run:
        with tempfile.TemporaryDirectory(prefix="voicestream-cdk-") as scratch:
            print_resources(_synthesize_or_exit(build, Path(scratch)))
        return
    repo = _repo_root()
    cdk = require_cdk(repo)  # before synthesis: a missing CLI is reported at once
    outdir = repo / "cdk.out" / name
    _synthesize_or_exit(build, outdir)
    status = run_cdk(cdk, [*cdk_args, "--app", str(outdir)], repo)
    if status:
        raise typer.Exit(status)


def _approval(yes: bool) -> list[str]:
    """The CDK CLI asks before widening permissions; --yes is for scripts without a terminal."""
    return ["--require-approval", "never"] if yes else []


def _synthesize_or_exit(build: Callable[[str], cdk.App], outdir: Path) -> list[Resource]:
    from voicestream.infra.toolkit import synthesize

    try:
        return synthesize(build, outdir)
    except ConfigError as error:
        raise _fail(str(error)) from None


def _weights_variant_dir(variant: str) -> Path:
    """Fetch a weights variant into the cache and stage it (model.onnx, voices/) for upload."""
    try:
        from voicestream.cli.progress import weights_progress
        from voicestream.engine.errors import EngineError
        from voicestream.engine.weights import resolve_weights
    except ImportError:
        raise _fail("--model-variant needs the speech engine: install voicestream[engine]") from None
    try:
        with weights_progress() as progress:
            files = resolve_weights(None, variant=variant, progress=progress)
    except EngineError as error:
        raise _fail(error.message) from None
    staged = _repo_root() / "cdk.out" / f"weights-{variant}"
    shutil.rmtree(staged, ignore_errors=True)
    (staged / "voices").mkdir(parents=True)
    shutil.copyfile(files.model_path, staged / "model.onnx")
    for voice in files.voices_dir.glob("*.bin"):
        shutil.copyfile(voice, staged / "voices" / voice.name)
    return staged


@speech_infra.command()
def deploy(
    model: Model,
    instance_type: Annotated[
        str, typer.Option("--instance-type", help="GPU (ml.g5.xlarge...) runs the CUDA image, CPU (ml.c7i...) the CPU image.")
    ] = "ml.g5.xlarge",
    min_instances: Annotated[int, typer.Option("--min-instances", help="Never fewer instances.")] = 1,
    max_instances: Annotated[int, typer.Option("--max-instances", help="Never more instances.")] = 4,
    target_sessions: Annotated[
        int | None,
        typer.Option("--target-sessions", help="Concurrent requests per instance to scale out at (default: from the instance, docs/DEPLOY.md)."),
    ] = None,
    image_uri: ImageUri = None,
    model_variant: Annotated[
        str | None,
        typer.Option("--model-variant", help="fp32 or fp16: upload that variant and mount it at /opt/ml/model (default: the image's int8)."),
    ] = None,
    dry_run: DryRun = False,
    yes: Yes = False,
) -> None:
    """Deploy MODEL as a SageMaker real-time endpoint with bidirectional streaming and autoscaling."""
    if model_variant not in (None, "fp32", "fp16"):
        raise _fail("--model-variant must be fp32 or fp16")
    try:  # the options are checked before a weights variant is fetched, which takes minutes
        SpeechDeployment(model, instance_type, min_instances, max_instances, target_sessions, image_uri)
    except ConfigError as error:
        raise _fail(str(error)) from None
    weights_dir = _weights_variant_dir(model_variant) if model_variant else None
    deployment = SpeechDeployment(
        model, instance_type, min_instances, max_instances, target_sessions, image_uri, weights_dir, model_variant
    )

    def build(outdir: str) -> cdk.App:
        from voicestream.infra.speech_stacks import speech_app

        return speech_app(deployment, outdir)

    typer.echo(
        f"{deployment.endpoint_name}: {instance_type} ({deployment.flavor} image), {min_instances}-{max_instances} "
        f"instances, scale out at {deployment.scale_out_target} concurrent requests per instance",
        err=True,
    )
    _synth_and_run(build, "speech", dry_run, ["deploy", "--all", *_approval(yes)])


@speech_infra.command()
def destroy(model: Model, region: Region = None) -> None:
    """Remove MODEL's endpoint and the foundation (the agent must be destroyed first)."""
    try:
        deployment = SpeechDeployment(model)
    except ConfigError as error:
        raise _fail(str(error)) from None
    from voicestream.infra.status import stack_outputs

    with _aws_errors():
        cloudformation = _client("cloudformation", region)
        agent = stack_outputs(cloudformation, AGENT_STACK)
        bucket = (stack_outputs(cloudformation, FOUNDATION_STACK) or {}).get("WeightsBucketName", "BUCKET")
    if agent is not None:
        raise _fail(f"the agent ({AGENT_STACK}) still speaks through this endpoint: run `agent-infra destroy` first")

    def build(outdir: str) -> cdk.App:
        from voicestream.infra.speech_stacks import speech_app

        return speech_app(deployment, outdir)

    stacks = [endpoint_stack_name(model), FOUNDATION_STACK]
    _synth_and_run(build, "speech", False, ["destroy", "--force", *stacks])
    typer.echo(
        f"Kept, on purpose: the weights bucket {bucket} (versioned: delete its objects and their versions, "
        f"then `aws s3 rb s3://{bucket}`), and the images in the CDK bootstrap's container-assets "
        "repository (shared by every CDK app in this account and region: `aws ecr batch-delete-image` "
        "if nothing else uses them)."
    )


@speech_infra.command()
def status(model: Annotated[str, typer.Argument(help="The speech model.")] = SPEECH_MODELS[0], region: Region = None) -> None:
    """Show the endpoint's status, instance counts and last failure."""
    from voicestream.infra.status import endpoint_status

    with _aws_errors():
        result = endpoint_status(_client("sagemaker", region), endpoint_name(model))
    typer.echo("\n".join(result.lines()))
    if result.status is None or result.status == "Failed":
        raise typer.Exit(1)


@speech_infra.command("list")
def list_models() -> None:
    """List the models speech-infra deploys, with their endpoint and defaults."""
    for model in SPEECH_MODELS:
        typer.echo(
            f"{model}  endpoint {endpoint_name(model)}  default ml.g5.xlarge ({image_flavor('ml.g5.xlarge')}), "
            f"scale out at {default_target_sessions('ml.g5.xlarge')} concurrent requests per instance"
        )


def _client(service: str, region: str | None) -> object:
    import boto3

    return boto3.client(service, region_name=region)


@contextmanager
def _aws_errors() -> Iterator[None]:
    """An AWS call that fails (no credentials, no region, access denied) ends the command with its
    message, not a traceback."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except (BotoCoreError, ClientError) as error:
        raise _fail(f"AWS: {error}") from None


@agent_infra.callback()
def _agent_group() -> None:
    """Deploy and operate the voicestream agent on Bedrock AgentCore."""


@agent_infra.command("deploy")
def agent_deploy(
    bedrock_model_id: Annotated[
        str, typer.Option("--bedrock-model-id", help="The Bedrock model or inference profile the agent answers with.")
    ],
    speech_endpoint: Annotated[
        str, typer.Option("--speech-endpoint", help="The speech endpoint it speaks through.")
    ] = DEFAULT_SPEECH_ENDPOINT,
    image_uri: ImageUri = None,
    dry_run: DryRun = False,
    yes: Yes = False,
) -> None:
    """Deploy the agent as an AgentCore runtime from its slim arm64 image."""
    try:
        deployment = AgentDeployment(bedrock_model_id, speech_endpoint, image_uri)
    except ConfigError as error:
        raise _fail(str(error)) from None

    def build(outdir: str) -> cdk.App:
        from voicestream.infra.agent_stack import agent_app

        return agent_app(deployment, outdir)

    _synth_and_run(build, "agent", dry_run, ["deploy", AGENT_STACK, *_approval(yes)])


@agent_infra.command("destroy")
def agent_destroy() -> None:
    """Remove the agent runtime and its role (before `speech-infra destroy`)."""

    def build(outdir: str) -> cdk.App:
        from voicestream.infra.agent_stack import agent_app

        # `cdk destroy` needs the stack in the assembly, not the options it was deployed with.
        return agent_app(AgentDeployment(DESTROY_ONLY_MODEL_ID), outdir)

    _synth_and_run(build, "agent", False, ["destroy", "--force", AGENT_STACK])


@agent_infra.command("status")
def agent_status(region: Region = None) -> None:
    """Show the runtime's status and ARN."""
    from voicestream.infra.status import runtime_status

    with _aws_errors():
        result = runtime_status(_client("bedrock-agentcore-control", region), AGENT_RUNTIME_NAME)
    typer.echo("\n".join(result.lines()))
    if result.status is None or result.status.endswith("FAILED"):
        raise typer.Exit(1)


@agent_infra.command()
def demo(
    endpoint_url: Annotated[
        str, typer.Option("--endpoint-url", help="The agent's base URL, or an AgentCore runtime ARN.")
    ],
    prompt: Annotated[str, typer.Option(help="The same prompt for every mode.")],
    trials: Annotated[int, typer.Option(min=1, help="Answers per mode.")] = 1,
    realtime: Annotated[
        bool,
        typer.Option(
            "--realtime",
            help="Instead: speak one OpenAI Realtime turn over the agent's /ws (an ARN: a SigV4-presigned URL).",
        ),
    ] = False,
    output: Annotated[
        Path, typer.Option("-o", "--output", help="With --realtime: where the spoken answer is written (WAV).")
    ] = Path("realtime-answer.wav"),
) -> None:
    """Run one prompt through bidi, batch and batch-stream and print time to first audio; with
    --realtime, speak it as one OpenAI Realtime turn over /ws instead."""
    if realtime:
        _realtime_demo(endpoint_url, prompt, output)
        return
    from voicestream.cli.agent_commands import print_comparison

    print_comparison(endpoint_url, prompt, trials, ["bidi", "batch", "batch-stream"])


REALTIME_TURN_TIMEOUT_S = 300.0
"""A cold runtime starts its microVM, then a CPU LLM writes the answer: minutes, not seconds."""


def _realtime_demo(endpoint_url: str, prompt: str, output: Path) -> None:
    """One Realtime turn: the answer's transcript and times printed, its audio written to `output`."""
    import asyncio

    from botocore.exceptions import BotoCoreError

    from voicestream.audio.wav import wav_header
    from voicestream.infra.realtime import (
        SAMPLE_RATE,
        RealtimeDemoError,
        realtime_target,
        speak_turn,
    )
    from voicestream.protocol import DEFAULT_VOICE, new_session_id

    try:
        target = realtime_target(endpoint_url, new_session_id())
        turn = asyncio.run(speak_turn(target, prompt, DEFAULT_VOICE, REALTIME_TURN_TIMEOUT_S))
    except (RealtimeDemoError, BotoCoreError, RuntimeError, ValueError) as error:
        raise _fail(f"realtime: {error}") from None
    output.write_bytes(wav_header(SAMPLE_RATE, data_bytes=len(turn.audio)) + turn.audio)
    first = "-" if turn.first_audio_s is None else f"{turn.first_audio_s * 1000:.0f} ms"
    typer.echo(f"status       {turn.status}")
    typer.echo(f"first audio  {first}")
    typer.echo(f"total        {turn.total_s * 1000:.0f} ms")
    typer.echo(f"audio        {turn.audio_seconds:.2f} s -> {output}")
    typer.echo(f"transcript   {turn.transcript}")
