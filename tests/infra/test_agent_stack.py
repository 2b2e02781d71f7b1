"""The agent app, synthesized offline: the AgentCore runtime, its image and its least-privilege role."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk.assertions import Match, Template
from tests.infra.assemblies import AGENT_PROFILE as PROFILE
from tests.infra.iam_checks import actions_of, assert_least_privilege, resources_of

from voicestream.infra.agent_stack import agent_app
from voicestream.infra.config import AGENT_STACK, RUNTIME_NAME_PATTERN, AgentDeployment, ConfigError

IMAGE_URI = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/my-agent:v7"


def synthesize(deployment: AgentDeployment, outdir: Path) -> tuple[dict, dict]:
    """The stack's template and asset manifest."""
    agent_app(deployment, str(outdir)).synth()
    return read_assembly(outdir)


def read_assembly(outdir: Path) -> tuple[dict, dict]:
    return (
        json.loads((outdir / f"{AGENT_STACK}.template.json").read_text()),
        json.loads((outdir / f"{AGENT_STACK}.assets.json").read_text()),
    )


@pytest.fixture(scope="module")
def built(agent_assembly: Path) -> tuple[dict, dict]:
    """The default: the image built from docker/agent.Dockerfile, a cross-region inference profile."""
    return read_assembly(agent_assembly)


@pytest.fixture(scope="module")
def given_image(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    """An existing ECR image, a plain foundation model id and another speech endpoint."""
    deployment = AgentDeployment("amazon.nova-lite-v1:0", speech_endpoint="my-speech", image_uri=IMAGE_URI)
    return synthesize(deployment, tmp_path_factory.mktemp("agent-image"))


def _runtime(template: dict) -> dict:
    (runtime,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::BedrockAgentCore::Runtime"]
    return runtime["Properties"]


def _role_id(template: dict) -> str:
    (role_id,) = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::IAM::Role"]
    return role_id


def test_runtime_name_image_and_environment(built: tuple[dict, dict]) -> None:
    template, _ = built
    runtime = _runtime(template)
    assert runtime["AgentRuntimeName"] == "voicestream_agent"
    assert RUNTIME_NAME_PATTERN.fullmatch(runtime["AgentRuntimeName"])
    assert runtime["NetworkConfiguration"] == {"NetworkMode": "PUBLIC"}
    assert runtime["RoleArn"] == {"Fn::GetAtt": [_role_id(template), "Arn"]}
    image = json.dumps(runtime["AgentRuntimeArtifact"]["ContainerConfiguration"]["ContainerUri"])
    assert "container-assets" in image
    environment = runtime["EnvironmentVariables"]
    assert environment["VOICESTREAM_SPEECH_URL"] == {
        "Fn::Join": ["", ["sagemaker://voicestream-kokoro-82m?region=", {"Ref": "AWS::Region"}]]
    }
    assert environment["VOICESTREAM_LLM"] == "bedrock"
    assert environment["VOICESTREAM_LLM_MODEL"] == PROFILE
    assert environment["AWS_REGION"] == {"Ref": "AWS::Region"}
    Template.from_json(template).has_output("AgentRuntimeArn", {"Value": {"Fn::GetAtt": [Match.any_value(), "AgentRuntimeArn"]}})


def test_image_is_the_slim_agent_dockerfile_for_arm64(built: tuple[dict, dict]) -> None:
    _, assets = built
    (image,) = assets["dockerImages"].values()
    assert image["source"]["dockerFile"] == "docker/agent.Dockerfile"
    assert image["source"]["platform"] == "linux/arm64"


def test_role_is_trusted_by_agentcore_in_this_account_only(built: tuple[dict, dict]) -> None:
    template, _ = built
    trust = template["Resources"][_role_id(template)]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust == [
        {
            "Action": "sts:AssumeRole",
            "Effect": "Allow",
            "Principal": {"Service": "bedrock-agentcore.amazonaws.com"},
            "Condition": {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}},
        }
    ]


@pytest.mark.parametrize("fixture", ["built", "given_image"])
def test_role_has_exactly_what_the_agent_uses(request: pytest.FixtureRequest, fixture: str) -> None:
    template, _ = request.getfixturevalue(fixture)
    assert_least_privilege(template)
    assert actions_of(template, _role_id(template)) == {
        "bedrock:InvokeModelWithResponseStream",
        "sagemaker:InvokeEndpointWithBidirectionalStream",
        "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability",
        "ecr:GetAuthorizationToken",
        "logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams",
    }
    for resource in resources_of(template, _role_id(template), "logs:PutLogEvents"):
        assert "log-group:/aws/bedrock-agentcore/runtimes/voicestream_agent-" in resource


def test_model_and_endpoint_permissions_name_one_model_and_one_endpoint(built: tuple[dict, dict]) -> None:
    template, _ = built
    role = _role_id(template)
    models = resources_of(template, role, "bedrock:InvokeModelWithResponseStream")
    assert len(models) == 2
    assert models[0].endswith(f':inference-profile/{PROFILE}"]]}}'), models[0]
    assert models[1].endswith(':bedrock:*::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0"]]}'), models[1]
    (endpoint,) = resources_of(template, role, "sagemaker:InvokeEndpointWithBidirectionalStream")
    assert endpoint.endswith(':endpoint/voicestream-kokoro-82m"]]}'), endpoint


def test_a_given_image_its_repository_a_foundation_model_and_another_endpoint(given_image: tuple[dict, dict]) -> None:
    template, assets = given_image
    assert not assets.get("dockerImages"), "nothing is built when --image-uri is given"
    runtime = _runtime(template)
    assert runtime["AgentRuntimeArtifact"]["ContainerConfiguration"]["ContainerUri"] == IMAGE_URI
    role = _role_id(template)
    (repository,) = resources_of(template, role, "ecr:BatchGetImage")
    assert repository.endswith(':repository/my-agent"}'), repository
    (model,) = resources_of(template, role, "bedrock:InvokeModelWithResponseStream")
    assert model.endswith(':bedrock:", {"Ref": "AWS::Region"}, "::foundation-model/amazon.nova-lite-v1:0"]]}'), model
    (endpoint,) = resources_of(template, role, "sagemaker:InvokeEndpointWithBidirectionalStream")
    assert endpoint.endswith(':endpoint/my-speech"]]}')
    assert runtime["EnvironmentVariables"]["VOICESTREAM_SPEECH_URL"]["Fn::Join"][1][0] == "sagemaker://my-speech?region="


@pytest.mark.parametrize(
    "options",
    [
        {"bedrock_model_id": "model id with spaces"},
        {"bedrock_model_id": PROFILE, "speech_endpoint": "bad_name!"},
        {"bedrock_model_id": PROFILE, "runtime_name": "voicestream-agent"},
        {"bedrock_model_id": PROFILE, "runtime_name": "x" * 49},
        {"bedrock_model_id": PROFILE, "image_uri": "my-agent:latest"},
    ],
    ids=["model id", "endpoint name", "hyphen in runtime name", "runtime name too long", "not an ECR image"],
)
def test_bad_options_are_refused_before_synthesis(options: dict) -> None:
    with pytest.raises(ConfigError):
        AgentDeployment(**options)
