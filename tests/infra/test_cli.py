"""`speech-infra` and `agent-infra`: dry runs offline, the pinned CDK CLI, and clear errors."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from voicestream.infra import cli as infra_cli
from voicestream.infra.toolkit import CDK_CLI_VERSION, CdkCliMissing, find_cdk

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _listed(output: str) -> set[tuple[str, str]]:
    """(type, logical id) pairs from a dry run's listing."""
    return {tuple(line.split()) for line in output.splitlines() if line.startswith("  ") and "::" in line}  # type: ignore[misc]


def test_speech_dry_run_lists_every_resource_offline() -> None:
    result = runner.invoke(
        infra_cli.speech_infra,
        ["deploy", "kokoro-82m", "--instance-type", "ml.c7i.2xlarge", "--min-instances", "2", "--dry-run"],
    )
    assert result.exit_code == 0, result.output
    assert "VoicestreamSpeechFoundation:" in result.stdout and "VoicestreamSpeechKokoro82m:" in result.stdout
    listed = _listed(result.stdout)
    for expected in [
        ("AWS::SageMaker::Model", "Model"),
        ("AWS::SageMaker::EndpointConfig", "EndpointConfig"),
        ("AWS::SageMaker::Endpoint", "Endpoint"),
    ]:
        assert expected in listed
    types = {t for t, _ in listed}
    assert {"AWS::S3::Bucket", "AWS::ApplicationAutoScaling::ScalableTarget", "AWS::CloudWatch::Alarm"} <= types
    assert sum(t == "AWS::ApplicationAutoScaling::ScalingPolicy" for t, _ in listed) == 2
    assert "ml.c7i.2xlarge (cpu image), 2-4 instances" in result.stderr


def test_agent_dry_run_lists_the_runtime_and_its_role() -> None:
    result = runner.invoke(
        infra_cli.agent_infra, ["deploy", "--bedrock-model-id", "amazon.nova-lite-v1:0", "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    listed = _listed(result.stdout)
    assert ("AWS::BedrockAgentCore::Runtime", "Runtime") in listed
    assert {t for t, _ in listed} == {"AWS::BedrockAgentCore::Runtime", "AWS::IAM::Role", "AWS::IAM::Policy"}


@pytest.mark.parametrize(
    ("app", "args", "message"),
    [
        ("speech", ["deploy", "whisper", "--dry-run"], "unknown model"),
        ("speech", ["deploy", "kokoro-82m", "--instance-type", "g5.xlarge", "--dry-run"], "not a SageMaker type"),
        ("speech", ["deploy", "kokoro-82m", "--min-instances", "5", "--dry-run"], "--min-instances <= --max-instances"),
        ("speech", ["deploy", "kokoro-82m", "--model-variant", "int4", "--dry-run"], "fp32 or fp16"),
        ("speech", ["deploy", "kokoro-82m", "--instance-type", "ml.c7i.metal", "--dry-run"], "pass --target-sessions"),
        ("agent", ["deploy", "--bedrock-model-id", "no spaces please", "--dry-run"], "not a Bedrock model"),
    ],
)
def test_bad_options_fail_fast_with_a_clear_message(app: str, args: list[str], message: str) -> None:
    result = runner.invoke(infra_cli.speech_infra if app == "speech" else infra_cli.agent_infra, args)
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_missing_cdk_cli_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VOICESTREAM_CDK", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CdkCliMissing, match=f"npm install --prefix .cdk aws-cdk@{CDK_CLI_VERSION}"):
        find_cdk(tmp_path)
    monkeypatch.setattr(infra_cli, "_repo_root", lambda: tmp_path)
    result = runner.invoke(infra_cli.speech_infra, ["deploy", "kokoro-82m"])
    assert result.exit_code == 2 and f"aws-cdk@{CDK_CLI_VERSION}" in result.output


def test_the_pinned_cdk_cli_reads_the_synthesized_assemblies(speech_assembly: Path, agent_assembly: Path) -> None:
    """A CDK CLI older than the locked aws-cdk-lib refuses its cloud assembly: this is the pin's test."""
    try:
        cdk = find_cdk(REPO)
    except CdkCliMissing:
        pytest.skip(f"the CDK CLI is not installed (.ci/run installs aws-cdk@{CDK_CLI_VERSION})")
    version = subprocess.run([cdk, "--version"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert version.split()[0] == CDK_CLI_VERSION
    environment = {**os.environ, "CDK_DISABLE_CLI_TELEMETRY": "true"}
    for assembly, stacks in ((speech_assembly, ["VoicestreamSpeechFoundation", "VoicestreamSpeechKokoro82m"]),
                             (agent_assembly, ["VoicestreamAgent"])):
        listed = subprocess.run(
            [cdk, "ls", "--no-notices", "--app", str(assembly)],
            capture_output=True, text=True, timeout=120, env=environment, check=False,
        )
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.split() == stacks


def test_entry_points_are_installed() -> None:
    bin_dir = Path(sys.executable).parent
    for script in ("speech-infra", "agent-infra"):
        path = shutil.which(script, path=str(bin_dir))
        assert path, f"{script} is not installed next to {sys.executable}"
        result = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0 and "deploy" in result.stdout and "status" in result.stdout


@pytest.fixture
def no_aws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No AWS credentials anywhere (and no instance metadata to ask); the repository is tmp_path."""
    for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("CDK_DISABLE_CLI_TELEMETRY", "true")
    monkeypatch.setattr(infra_cli, "_repo_root", lambda: tmp_path)
    return tmp_path


def test_deploy_and_destroy_run_the_cdk_cli_on_the_assembly(
    no_aws: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Up to AWS: the command is printed, run on the synthesized assembly, and its failure passed on."""
    try:
        cdk = find_cdk(REPO)
    except CdkCliMissing:
        pytest.skip(f"the CDK CLI is not installed (.ci/run installs aws-cdk@{CDK_CLI_VERSION})")
    monkeypatch.setenv("VOICESTREAM_CDK", cdk)
    assembly = no_aws / "cdk.out" / "agent"
    for args, command in (
        (["deploy", "--bedrock-model-id", "amazon.nova-lite-v1:0"], "deploy VoicestreamAgent"),
        (["deploy", "--bedrock-model-id", "amazon.nova-lite-v1:0", "--yes"],
         "deploy VoicestreamAgent --require-approval never"),
        (["destroy"], "destroy --force VoicestreamAgent"),
    ):
        result = runner.invoke(infra_cli.agent_infra, args)
        captured = capfd.readouterr()
        printed = f"$ {cdk} {command} --app {assembly}"  # rich may wrap it, inside a path too
        assert "".join(printed.split()) in "".join(result.stderr.split()), result.stderr
        assert (assembly / "VoicestreamAgent.template.json").is_file()
        assert result.exit_code != 0, "without credentials the CDK CLI must fail, and the command with it"
        assert "Unable to resolve AWS account" in captured.err + captured.out


def test_a_weights_variant_is_staged_and_uploaded(no_aws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--model-variant resolves the weights (here an explicit directory) and stages them for upload."""
    weights = no_aws / "weights"
    (weights / "voices").mkdir(parents=True)
    (weights / "model_fp16.onnx").write_bytes(b"onnx")
    (weights / "voices" / "zz_custom.bin").write_bytes(b"voice")  # a voice of one's own: not checked
    monkeypatch.setenv("VOICESTREAM_MODEL_DIR", str(weights))
    result = runner.invoke(infra_cli.speech_infra, ["deploy", "kokoro-82m", "--model-variant", "fp16", "--dry-run"])
    assert result.exit_code == 0, result.output
    staged = no_aws / "cdk.out" / "weights-fp16"
    assert (staged / "model.onnx").read_bytes() == b"onnx"
    assert (staged / "voices" / "zz_custom.bin").read_bytes() == b"voice"
    assert "Custom::CDKBucketDeployment" in {t for t, _ in _listed(result.stdout)}


def test_list_names_each_model_its_endpoint_and_scaling_default() -> None:
    result = runner.invoke(infra_cli.speech_infra, ["list"])
    assert result.exit_code == 0
    assert result.stdout.split()[:3] == ["kokoro-82m", "endpoint", "voicestream-kokoro-82m"]
    assert "scale out at 8 concurrent requests per instance" in result.stdout
