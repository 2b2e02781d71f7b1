"""The speech app, synthesized offline (jsii, no AWS) and held to issue 9's checklist.

Each deployment is synthesized once (the defaults once per run, tests/infra/conftest.py):
synthesis starts node and is slow.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from aws_cdk.assertions import Match, Template
from aws_cdk.cx_api import CloudAssembly
from tests.infra.iam_checks import actions_of, assert_least_privilege, resources_of

from voicestream.infra.config import (
    CONTAINER_STARTUP_TIMEOUT_S,
    FOUNDATION_STACK,
    GPU_AMI_VERSION,
    SpeechDeployment,
    default_target_sessions,
    endpoint_stack_name,
)
from voicestream.infra.speech_stacks import speech_app

REPO = Path(__file__).resolve().parents[2]
BIDI_LABEL = "com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true"
ENDPOINT_STACK = endpoint_stack_name("kokoro-82m")


class Synthesized:
    """One synthesized speech app: its templates and asset manifests, by stack name."""

    def __init__(self, deployment: SpeechDeployment, outdir: Path) -> None:
        assembly = CloudAssembly(str(outdir))
        self.deployment = deployment
        self.templates = {s.stack_name: s.template for s in assembly.stacks}
        self.assets = {
            s.stack_name: json.loads((outdir / f"{s.stack_name}.assets.json").read_text()) for s in assembly.stacks
        }

    def template(self, stack: str) -> Template:
        return Template.from_json(self.templates[stack])

    def resources(self, stack: str, type_: str) -> dict[str, Any]:
        return {k: v for k, v in self.templates[stack]["Resources"].items() if v["Type"] == type_}

    def one(self, stack: str, type_: str) -> tuple[str, dict[str, Any]]:
        found = self.resources(stack, type_)
        assert len(found) == 1, (type_, list(found))
        return next(iter(found.items()))


@pytest.fixture(scope="module")
def gpu(speech_assembly: Path) -> Synthesized:
    """The defaults: ml.g5.xlarge, 1 to 4 instances, the CUDA image built here, baked-in weights."""
    return Synthesized(SpeechDeployment(), speech_assembly)


@pytest.fixture(scope="module")
def cpu_fp16(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """A CPU instance, 2 to 6 instances, and an fp16 weights variant uploaded to the bucket."""
    weights = tmp_path_factory.mktemp("weights-fp16")
    (weights / "voices").mkdir()
    (weights / "model.onnx").write_bytes(b"an fp16 model")
    (weights / "voices" / "af_heart.bin").write_bytes(b"a voice")
    deployment = SpeechDeployment(
        instance_type="ml.c7i.xlarge", min_instances=2, max_instances=6, weights_dir=weights, weights_variant="fp16"
    )
    outdir = tmp_path_factory.mktemp("cpu")
    speech_app(deployment, str(outdir)).synth()
    return Synthesized(deployment, outdir)


@pytest.fixture(scope="module", params=["gpu", "cpu_fp16"])
def app(request: pytest.FixtureRequest) -> Synthesized:
    return request.getfixturevalue(request.param)


def test_endpoint_config_instance_routing_and_startup_timeout(gpu: Synthesized, cpu_fp16: Synthesized) -> None:
    for app, instance_type, count in ((gpu, "ml.g5.xlarge", 1), (cpu_fp16, "ml.c7i.xlarge", 2)):
        app.template(ENDPOINT_STACK).has_resource_properties(
            "AWS::SageMaker::EndpointConfig",
            {
                "ProductionVariants": [
                    Match.object_like(
                        {
                            "VariantName": "AllTraffic",
                            "InstanceType": instance_type,
                            "InitialInstanceCount": count,
                            "ContainerStartupHealthCheckTimeoutInSeconds": CONTAINER_STARTUP_TIMEOUT_S,
                            "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
                        }
                    )
                ]
            },
        )
    assert CONTAINER_STARTUP_TIMEOUT_S >= 300, "model load, warm-up and image pull need minutes on a cold instance"


def test_gpu_hosts_get_a_cuda_13_driver_and_cpu_hosts_no_gpu_ami(gpu: Synthesized, cpu_fp16: Synthesized) -> None:
    """The default GPU AMI has driver 470: onnxruntime-gpu (CUDA 13) would fall back to the CPU."""
    _, config = gpu.one(ENDPOINT_STACK, "AWS::SageMaker::EndpointConfig")
    assert config["Properties"]["ProductionVariants"][0]["InferenceAmiVersion"] == GPU_AMI_VERSION
    assert "gpu-4" in GPU_AMI_VERSION, "driver 580 is the 4.x AMIs'"
    _, config = cpu_fp16.one(ENDPOINT_STACK, "AWS::SageMaker::EndpointConfig")
    assert "InferenceAmiVersion" not in config["Properties"]["ProductionVariants"][0]
    sagemaker = botocore.session.get_session().get_service_model("sagemaker")
    assert GPU_AMI_VERSION in sagemaker.shape_for("ProductionVariantInferenceAmiVersion").enum


def test_endpoint_keeps_the_scaled_count_across_redeploys(app: Synthesized) -> None:
    _, endpoint = app.one(ENDPOINT_STACK, "AWS::SageMaker::Endpoint")
    assert endpoint["Properties"]["EndpointName"] == "voicestream-kokoro-82m"
    assert endpoint["Properties"]["RetainAllVariantProperties"] is True
    assert endpoint["Properties"]["EndpointConfigName"] == {"Fn::GetAtt": ["EndpointConfig", "EndpointConfigName"]}


def test_autoscaling_target_and_both_policies(app: Synthesized) -> None:
    deployment = app.deployment
    target_id, target = app.one(ENDPOINT_STACK, "AWS::ApplicationAutoScaling::ScalableTarget")
    properties = target["Properties"]
    assert properties["ServiceNamespace"] == "sagemaker"
    assert properties["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    assert (properties["MinCapacity"], properties["MaxCapacity"]) == (
        deployment.min_instances, deployment.max_instances,
    )
    assert properties["ResourceId"] == {
        "Fn::Join": ["", ["endpoint/", {"Fn::GetAtt": ["Endpoint", "EndpointName"]}, "/variant/AllTraffic"]]
    }
    assert "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint" in json.dumps(properties["RoleARN"])

    policies = {p["Properties"]["PolicyType"]: p["Properties"] for p in app.resources(
        ENDPOINT_STACK, "AWS::ApplicationAutoScaling::ScalingPolicy").values()}
    assert set(policies) == {"TargetTrackingScaling", "StepScaling"}
    for policy in policies.values():
        assert policy["ScalingTargetId"] == {"Ref": target_id}

    tracking = policies["TargetTrackingScaling"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["PredefinedMetricSpecification"] == {
        "PredefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"
    }
    assert tracking["TargetValue"] == default_target_sessions(deployment.instance_type) > 0
    assert tracking["DisableScaleIn"] is True, "scale-in is the step policy's, and conservative"

    step = policies["StepScaling"]["StepScalingPolicyConfiguration"]
    assert step["AdjustmentType"] == "ChangeInCapacity"
    assert [a["ScalingAdjustment"] for a in step["StepAdjustments"]] == [-1], "one instance at a time"
    assert step["Cooldown"] >= 300
    _, alarm = app.one(ENDPOINT_STACK, "AWS::CloudWatch::Alarm")
    alarm = alarm["Properties"]
    assert alarm["MetricName"] == "ConcurrentRequestsPerModel" and alarm["Namespace"] == "AWS/SageMaker"
    assert {d["Name"]: d["Value"] for d in alarm["Dimensions"]} == {
        "EndpointName": "voicestream-kokoro-82m", "VariantName": "AllTraffic",
    }
    assert alarm["ComparisonOperator"] == "LessThanOrEqualToThreshold"
    assert alarm["Threshold"] < tracking["TargetValue"]
    assert alarm["EvaluationPeriods"] * alarm["Period"] >= 10 * 60, "idle for at least ten minutes first"


def test_default_targets_follow_the_instance() -> None:
    """Half of vCPUs / RTF on CPU instances (docs/DEPLOY.md, "Scaling"); a fixed guess on GPUs."""
    assert [default_target_sessions(f"ml.c7i.{size}") for size in ("large", "xlarge", "2xlarge", "12xlarge")] == [
        1, 3, 7, 45,
    ]
    assert default_target_sessions("ml.g6.12xlarge") == default_target_sessions("ml.g5.xlarge") == 8


def test_weights_bucket_is_encrypted_private_ssl_only_and_retained(app: Synthesized) -> None:
    bucket_id, bucket = app.one(FOUNDATION_STACK, "AWS::S3::Bucket")
    assert bucket["DeletionPolicy"] == "Retain" and bucket["UpdateReplacePolicy"] == "Retain"
    properties = bucket["Properties"]
    encryption = properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert encryption[0]["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in {"AES256", "aws:kms"}
    assert properties["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True,
    }
    app.template(FOUNDATION_STACK).has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "Bucket": {"Ref": bucket_id},
            "PolicyDocument": {
                "Statement": Match.array_with([
                    Match.object_like({
                        "Effect": "Deny",
                        "Action": "s3:*",
                        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                        "Principal": {"AWS": "*"},
                    })
                ])
            },
        },
    )


def test_no_wildcard_action_and_no_account_wide_resource(app: Synthesized) -> None:
    for stack in app.templates.values():
        assert_least_privilege(stack)


def test_execution_role_pulls_its_image_reads_its_bucket_writes_its_logs(app: Synthesized) -> None:
    template = app.templates[FOUNDATION_STACK]
    role_id = _role(app, "sagemaker.amazonaws.com")
    assert actions_of(template, role_id) == {
        "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability",
        "ecr:GetAuthorizationToken",
        "logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams",
        "s3:GetObject", "s3:ListBucket",
    }
    (repository,) = resources_of(template, role_id, "ecr:BatchGetImage")
    assert "repository/cdk-hnb659fds-container-assets-" in repository
    bucket_id = next(iter(app.resources(FOUNDATION_STACK, "AWS::S3::Bucket")))
    assert all(bucket_id in r for r in resources_of(template, role_id, "s3:GetObject"))
    assert resources_of(template, role_id, "s3:ListBucket") == [json.dumps({"Fn::GetAtt": [bucket_id, "Arn"]})]
    logs = resources_of(template, role_id, "logs:PutLogEvents")
    assert [r.rsplit("log-group:", 1)[1] for r in logs] == [
        '/aws/sagemaker/Endpoints/voicestream-kokoro-82m"]]}', '/aws/sagemaker/Endpoints/voicestream-kokoro-82m:*"]]}',
    ], "its own log group and its streams, nothing else"
    _, log_group = app.one(FOUNDATION_STACK, "AWS::Logs::LogGroup")
    assert log_group["Properties"]["LogGroupName"] == "/aws/sagemaker/Endpoints/voicestream-kokoro-82m"
    assert log_group["Properties"]["RetentionInDays"] > 0


def test_client_role_invokes_this_projects_endpoints_only(app: Synthesized) -> None:
    template = app.templates[FOUNDATION_STACK]
    role_id = _role(app, None)
    assert actions_of(template, role_id) == {
        "sagemaker:InvokeEndpoint",
        "sagemaker:InvokeEndpointWithResponseStream",
        "sagemaker:InvokeEndpointWithBidirectionalStream",
    }
    (resource,) = resources_of(template, role_id, "sagemaker:InvokeEndpoint")
    assert resource.endswith(':endpoint/voicestream-*"]]}'), resource


def _role(app: Synthesized, service: str | None) -> str:
    """The foundation's role trusted by `service` (None: the one trusted by the account)."""
    for logical_id, role in app.resources(FOUNDATION_STACK, "AWS::IAM::Role").items():
        principal = role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
        if (principal.get("Service") == service) if service else "AWS" in principal:
            return logical_id
    raise AssertionError(f"no role trusted by {service or 'the account'}")


def test_model_runs_the_image_with_baked_weights_by_default(gpu: Synthesized) -> None:
    _, model = gpu.one(ENDPOINT_STACK, "AWS::SageMaker::Model")
    container = model["Properties"]["PrimaryContainer"]
    assert "ModelDataSource" not in container and "ModelDataUrl" not in container
    assert "Fn::Sub" in json.dumps(container["Image"]) and "container-assets" in json.dumps(container["Image"])
    role = json.dumps(model["Properties"]["ExecutionRoleArn"])
    assert "EndpointExecutionRole" in role and "Fn::ImportValue" in role


def test_a_weights_variant_is_uploaded_and_mounted_from_the_bucket(cpu_fp16: Synthesized) -> None:
    _, model = cpu_fp16.one(ENDPOINT_STACK, "AWS::SageMaker::Model")
    source = model["Properties"]["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]
    assert source["S3DataType"] == "S3Prefix" and source["CompressionType"] == "None"
    uri = json.dumps(source["S3Uri"])
    upload_id, upload = cpu_fp16.one(ENDPOINT_STACK, "Custom::CDKBucketDeployment")
    # The bucket is read from the upload, so the model is created only once the upload is done.
    assert f'["{upload_id}", "DestinationBucketArn"]' in uri and uri.endswith('/kokoro-82m/fp16/"]]}'), uri
    assert upload["Properties"]["DestinationBucketKeyPrefix"] == "kokoro-82m/fp16/"
    assert "WeightsBucket" in json.dumps(upload["Properties"]["DestinationBucketName"])


@pytest.mark.parametrize(("fixture", "flavor"), [("gpu", "cuda"), ("cpu_fp16", "cpu")])
def test_speech_image_flavor_platform_and_bidirectional_label(
    request: pytest.FixtureRequest, fixture: str, flavor: str
) -> None:
    app: Synthesized = request.getfixturevalue(fixture)
    (image,) = app.assets[ENDPOINT_STACK]["dockerImages"].values()
    source = image["source"]
    assert source["dockerFile"] == "docker/speech.Dockerfile"
    assert source["platform"] == "linux/amd64"
    assert source["dockerBuildArgs"] == {"FLAVOR": flavor}
    dockerfile = (REPO / source["dockerFile"]).read_text()
    assert f"LABEL {BIDI_LABEL}" in dockerfile


def test_no_secret_in_any_template(app: Synthesized) -> None:
    text = json.dumps(app.templates).lower()
    for marker in ("aws_secret_access_key", "secretaccesskey", "password", "api_key", "akia"):
        assert marker not in text, marker
