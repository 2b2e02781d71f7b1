"""`speech-infra status`, `agent-infra status` and the destroy-order check, against botocore's Stubber.

The Stubber validates every response against the installed service model, so the shapes
below are the services' own (DescribeEndpoint, ListAgentRuntimes, GetAgentRuntime,
DescribeStacks); errors are the ones the services answer with.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from typer.testing import CliRunner

from voicestream.infra import cli as infra_cli
from voicestream.infra.status import endpoint_status, runtime_status, stack_outputs

REGION = "eu-west-1"
ENDPOINT = "voicestream-kokoro-82m"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
RUNTIME_ARN = "arn:aws:bedrock-agentcore:eu-west-1:123456789012:runtime/voicestream_agent-Ab12Cd34Ef"


def _client(service: str) -> tuple[object, Stubber]:
    client = boto3.client(
        service, region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    return client, Stubber(client)


def _stubbed(service: str) -> Iterator[tuple[object, Stubber]]:
    client, stubber = _client(service)
    with stubber:
        yield client, stubber
    stubber.assert_no_pending_responses()


@pytest.fixture
def sagemaker() -> Iterator[tuple[object, Stubber]]:
    yield from _stubbed("sagemaker")


@pytest.fixture
def control() -> Iterator[tuple[object, Stubber]]:
    yield from _stubbed("bedrock-agentcore-control")


def _endpoint(status: str, current: int | None, desired: int | None, failure: str | None = None) -> dict:
    variant: dict = {"VariantName": "AllTraffic", "CurrentWeight": 1.0, "DesiredWeight": 1.0}
    if current is not None:
        variant["CurrentInstanceCount"] = current
    if desired is not None:
        variant["DesiredInstanceCount"] = desired
    response = {
        "EndpointName": ENDPOINT,
        "EndpointArn": f"arn:aws:sagemaker:{REGION}:123456789012:endpoint/{ENDPOINT}",
        "EndpointConfigName": "EndpointConfig-AbCdEf123456",
        "ProductionVariants": [variant],
        "EndpointStatus": status,
        "CreationTime": NOW,
        "LastModifiedTime": NOW,
    }
    if failure:
        response["FailureReason"] = failure
    return response


def test_in_service_endpoint_reports_its_counts(sagemaker: tuple[object, Stubber]) -> None:
    client, stubber = sagemaker
    stubber.add_response("describe_endpoint", _endpoint("InService", 3, 4), {"EndpointName": ENDPOINT})
    result = endpoint_status(client, ENDPOINT)
    assert (result.status, result.instances, result.failure_reason) == ("InService", 3, None)
    assert "variant    AllTraffic: current 3, desired 4" in result.lines()


def test_failed_endpoint_reports_the_reason(sagemaker: tuple[object, Stubber]) -> None:
    client, stubber = sagemaker
    reason = (
        "The primary container for production variant AllTraffic did not pass the ping health check. "
        "Please check CloudWatch logs for this endpoint."
    )
    stubber.add_response("describe_endpoint", _endpoint("Failed", None, None, reason), {"EndpointName": ENDPOINT})
    result = endpoint_status(client, ENDPOINT)
    assert result.status == "Failed" and result.failure_reason == reason
    assert f"failure    {reason}" in result.lines()
    assert "variant    AllTraffic: current -, desired -" in result.lines()


def test_missing_endpoint_is_not_deployed(sagemaker: tuple[object, Stubber]) -> None:
    client, stubber = sagemaker
    stubber.add_client_error(
        "describe_endpoint",
        service_error_code="ValidationException",
        service_message=f'Could not find endpoint "arn:aws:sagemaker:{REGION}:123456789012:endpoint/{ENDPOINT}".',
        http_status_code=400,
        expected_params={"EndpointName": ENDPOINT},
    )
    result = endpoint_status(client, ENDPOINT)
    assert result.status is None and result.lines()[-1] == "status     not deployed"


def test_other_errors_are_not_taken_for_absence(sagemaker: tuple[object, Stubber]) -> None:
    client, stubber = sagemaker
    stubber.add_client_error(
        "describe_endpoint",
        service_error_code="AccessDeniedException",
        service_message="User is not authorized to perform: sagemaker:DescribeEndpoint",
        http_status_code=400,
    )
    with pytest.raises(ClientError):
        endpoint_status(client, ENDPOINT)


def _summary(name: str, runtime_id: str, status: str) -> dict:
    return {
        "agentRuntimeArn": f"arn:aws:bedrock-agentcore:{REGION}:123456789012:runtime/{runtime_id}",
        "agentRuntimeId": runtime_id,
        "agentRuntimeVersion": "1",
        "agentRuntimeName": name,
        "description": "an agent",
        "lastUpdatedAt": NOW,
        "status": status,
    }


def _runtime(status: str, failure: str | None = None) -> dict:
    response = {
        "agentRuntimeArn": RUNTIME_ARN,
        "agentRuntimeName": "voicestream_agent",
        "agentRuntimeId": "voicestream_agent-Ab12Cd34Ef",
        "agentRuntimeVersion": "2",
        "createdAt": NOW,
        "lastUpdatedAt": NOW,
        "roleArn": "arn:aws:iam::123456789012:role/VoicestreamAgent-RuntimeRole",
        "status": status,
        "lifecycleConfiguration": {"idleRuntimeSessionTimeout": 900, "maxLifetime": 28800},
    }
    if failure:
        response["failureReason"] = failure
    return response


def test_runtime_found_by_name_across_pages(control: tuple[object, Stubber]) -> None:
    client, stubber = control
    stubber.add_response(
        "list_agent_runtimes",
        {"agentRuntimes": [_summary("other_agent", "other_agent-Zz99Yy88Xx", "READY")], "nextToken": "page-2"},
        {},
    )
    stubber.add_response(
        "list_agent_runtimes",
        {"agentRuntimes": [_summary("voicestream_agent", "voicestream_agent-Ab12Cd34Ef", "READY")]},
        {"nextToken": "page-2"},
    )
    stubber.add_response(
        "get_agent_runtime", _runtime("READY"), {"agentRuntimeId": "voicestream_agent-Ab12Cd34Ef"}
    )
    result = runtime_status(client, "voicestream_agent")
    assert (result.status, result.arn, result.version) == ("READY", RUNTIME_ARN, "2")
    assert f"arn        {RUNTIME_ARN}" in result.lines()


def test_failed_runtime_reports_the_reason(control: tuple[object, Stubber]) -> None:
    client, stubber = control
    stubber.add_response(
        "list_agent_runtimes",
        {"agentRuntimes": [_summary("voicestream_agent", "voicestream_agent-Ab12Cd34Ef", "CREATE_FAILED")]},
        {},
    )
    reason = "Access denied while validating ECR URI: the role cannot pull the image"
    stubber.add_response("get_agent_runtime", _runtime("CREATE_FAILED", reason), {"agentRuntimeId": "voicestream_agent-Ab12Cd34Ef"})
    result = runtime_status(client, "voicestream_agent")
    assert result.status == "CREATE_FAILED" and f"failure    {reason}" in result.lines()


def test_no_runtime_is_not_deployed(control: tuple[object, Stubber]) -> None:
    client, stubber = control
    stubber.add_response("list_agent_runtimes", {"agentRuntimes": []}, {})
    assert runtime_status(client, "voicestream_agent").status is None


def _stack(name: str, outputs: dict[str, str]) -> dict:
    return {
        "Stacks": [
            {
                "StackName": name,
                "CreationTime": NOW,
                "StackStatus": "UPDATE_COMPLETE",
                "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()],
            }
        ]
    }


def _no_stack(stubber: Stubber, name: str) -> None:
    stubber.add_client_error(
        "describe_stacks",
        service_error_code="ValidationError",
        service_message=f"Stack with id {name} does not exist",
        http_status_code=400,
        expected_params={"StackName": name},
    )


def test_stack_outputs_or_none() -> None:
    client, stubber = _client("cloudformation")
    stubber.add_response(
        "describe_stacks", _stack("VoicestreamSpeechFoundation", {"WeightsBucketName": "weights-abc"}),
        {"StackName": "VoicestreamSpeechFoundation"},
    )
    _no_stack(stubber, "VoicestreamAgent")
    with stubber:
        assert stack_outputs(client, "VoicestreamSpeechFoundation") == {"WeightsBucketName": "weights-abc"}
        assert stack_outputs(client, "VoicestreamAgent") is None
    stubber.assert_no_pending_responses()


def test_status_commands_print_and_exit_by_state(
    monkeypatch: pytest.MonkeyPatch, sagemaker: tuple[object, Stubber], control: tuple[object, Stubber]
) -> None:
    """The CLI commands, on stubbed clients: 0 when serving, 1 when failed or absent."""
    clients = {"sagemaker": sagemaker, "bedrock-agentcore-control": control}
    monkeypatch.setattr(infra_cli, "_client", lambda service, region: clients[service][0])
    sagemaker[1].add_response("describe_endpoint", _endpoint("InService", 1, 1), {"EndpointName": ENDPOINT})
    sagemaker[1].add_response("describe_endpoint", _endpoint("Failed", 0, 1, "Image pull failed"), {"EndpointName": ENDPOINT})
    control[1].add_response("list_agent_runtimes", {"agentRuntimes": []}, {})
    runner = CliRunner()
    ok = runner.invoke(infra_cli.speech_infra, ["status", "kokoro-82m"])
    assert ok.exit_code == 0 and "status     InService" in ok.stdout
    failed = runner.invoke(infra_cli.speech_infra, ["status"])
    assert failed.exit_code == 1 and "failure    Image pull failed" in failed.stdout
    absent = runner.invoke(infra_cli.agent_infra, ["status"])
    assert absent.exit_code == 1 and "not deployed" in absent.stdout


def test_speech_destroy_refuses_while_the_agent_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    client, stubber = _client("cloudformation")
    stubber.add_response(
        "describe_stacks", _stack("VoicestreamAgent", {"AgentRuntimeArn": RUNTIME_ARN}), {"StackName": "VoicestreamAgent"}
    )
    stubber.add_response(
        "describe_stacks", _stack("VoicestreamSpeechFoundation", {"WeightsBucketName": "weights-abc"}),
        {"StackName": "VoicestreamSpeechFoundation"},
    )
    monkeypatch.setattr(infra_cli, "_client", lambda service, region: client)
    with stubber:
        result = CliRunner().invoke(infra_cli.speech_infra, ["destroy", "kokoro-82m"])
    assert result.exit_code == 2
    assert "agent-infra destroy" in result.output


def test_speech_destroy_names_the_bucket_it_keeps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the agent check, destroy runs the CDK CLI; its exit status and the kept bucket are reported."""
    client, stubber = _client("cloudformation")
    _no_stack(stubber, "VoicestreamAgent")
    stubber.add_response(
        "describe_stacks", _stack("VoicestreamSpeechFoundation", {"WeightsBucketName": "weights-abc"}),
        {"StackName": "VoicestreamSpeechFoundation"},
    )
    ran: list[list[str]] = []
    monkeypatch.setattr(infra_cli, "_client", lambda service, region: client)
    monkeypatch.setattr(infra_cli, "_synth_and_run", lambda build, name, dry_run, args: ran.append(args))
    with stubber:
        result = CliRunner().invoke(infra_cli.speech_infra, ["destroy", "kokoro-82m"])
    assert result.exit_code == 0, result.output
    assert ran == [["destroy", "--force", "VoicestreamSpeechKokoro82m", "VoicestreamSpeechFoundation"]]
    assert "weights bucket weights-abc" in result.stdout and "aws s3 rb s3://weights-abc" in result.stdout


def test_aws_errors_end_the_command_with_their_message(
    monkeypatch: pytest.MonkeyPatch, sagemaker: tuple[object, Stubber]
) -> None:
    client, stubber = sagemaker
    stubber.add_client_error(
        "describe_endpoint",
        service_error_code="AccessDeniedException",
        service_message="User: arn:aws:iam::123456789012:user/dev is not authorized to perform: sagemaker:DescribeEndpoint",
        http_status_code=400,
    )
    monkeypatch.setattr(infra_cli, "_client", lambda service, region: client)
    result = CliRunner().invoke(infra_cli.speech_infra, ["status"])
    assert result.exit_code == 2
    assert "not authorized to perform: sagemaker:DescribeEndpoint" in " ".join(result.output.split())
