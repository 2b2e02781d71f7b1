"""The speech server on SageMaker: a foundation stack and one endpoint stack per model.

foundation: the weights bucket, the endpoint's execution role and log group, and a client
role that may invoke this project's endpoints. endpoint: the image, the model (weights
baked in, or a variant from the bucket at /opt/ml/model), the endpoint config, the endpoint,
and autoscaling on the variant's instance count.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3_deployment
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from voicestream.infra.config import (
    CONTAINER_STARTUP_TIMEOUT_S,
    FOUNDATION_STACK,
    GPU_AMI_VERSION,
    PROJECT,
    VARIANT_NAME,
    SpeechDeployment,
    endpoint_stack_name,
)
from voicestream.infra.images import image_asset, log_statement, pull_statements, repository_arn

SCALE_IN_BELOW = 0.25
"""Scale in only when instances run under a quarter of the scale-out target..."""
SCALE_IN_PERIODS = 15
"""...for this many consecutive minutes, one instance at a time."""


def endpoint_log_group_name(endpoint: str) -> str:
    return f"/aws/sagemaker/Endpoints/{endpoint}"


class SpeechFoundationStack(cdk.Stack):
    """What outlives an endpoint: the weights bucket and the roles."""

    def __init__(self, scope: Construct, construct_id: str, deployment: SpeechDeployment, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.bucket = s3.Bucket(
            self,
            "WeightsBucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        endpoint = deployment.endpoint_name
        self.log_group = logs.LogGroup(
            self,
            "EndpointLogs",
            log_group_name=endpoint_log_group_name(endpoint),
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self.execution_role = iam.Role(
            self,
            "EndpointExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"Runs the {endpoint} SageMaker endpoint: its image, its weights, its logs.",
        )
        for statement in pull_statements(repository_arn(self, deployment.image_uri)):
            self.execution_role.add_to_policy(statement)
        self.execution_role.add_to_policy(log_statement(self._log_group_arn(endpoint)))
        self.execution_role.add_to_policy(
            iam.PolicyStatement(sid="ReadWeights", actions=["s3:GetObject"], resources=[self.bucket.arn_for_objects("*")])
        )
        self.execution_role.add_to_policy(
            iam.PolicyStatement(sid="ListWeights", actions=["s3:ListBucket"], resources=[self.bucket.bucket_arn])
        )
        self.client_role = iam.Role(
            self,
            "SpeechClientRole",
            assumed_by=iam.AccountRootPrincipal(),
            description=f"Speaks through this project's endpoints ({PROJECT}-*), nothing else.",
        )
        self.client_role.add_to_policy(
            iam.PolicyStatement(
                sid="InvokeSpeechEndpoints",
                actions=[
                    "sagemaker:InvokeEndpoint",
                    "sagemaker:InvokeEndpointWithResponseStream",
                    "sagemaker:InvokeEndpointWithBidirectionalStream",
                ],
                resources=[self.format_arn(service="sagemaker", resource="endpoint", resource_name=f"{PROJECT}-*")],
            )
        )
        cdk.CfnOutput(self, "WeightsBucketName", value=self.bucket.bucket_name)
        cdk.CfnOutput(self, "SpeechClientRoleArn", value=self.client_role.role_arn)

    def _log_group_arn(self, endpoint: str) -> str:
        return self.format_arn(
            service="logs",
            resource="log-group",
            resource_name=endpoint_log_group_name(endpoint),
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )


class SpeechEndpointStack(cdk.Stack):
    """One model's real-time endpoint with bidirectional streaming, and its autoscaling."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        deployment: SpeechDeployment,
        foundation: SpeechFoundationStack,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        image_uri = deployment.image_uri or image_asset(
            self, "SpeechImage", "speech.Dockerfile", ecr_assets.Platform.LINUX_AMD64, {"FLAVOR": deployment.flavor}
        ).image_uri
        container = sagemaker.CfnModel.ContainerDefinitionProperty(
            image=image_uri,
            environment={"VOICESTREAM_OFFLINE": "1"},
            model_data_source=self._weights_source(deployment, foundation),
        )
        model = sagemaker.CfnModel(
            self, "Model", execution_role_arn=foundation.execution_role.role_arn, primary_container=container
        )
        config = sagemaker.CfnEndpointConfig(
            self,
            "EndpointConfig",
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=VARIANT_NAME,
                    model_name=model.attr_model_name,
                    instance_type=deployment.instance_type,
                    initial_instance_count=deployment.min_instances,
                    initial_variant_weight=1.0,
                    container_startup_health_check_timeout_in_seconds=CONTAINER_STARTUP_TIMEOUT_S,
                    inference_ami_version=GPU_AMI_VERSION if deployment.flavor == "cuda" else None,
                    routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                        routing_strategy="LEAST_OUTSTANDING_REQUESTS"
                    ),
                )
            ],
        )
        endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=deployment.endpoint_name,
            endpoint_config_name=config.attr_endpoint_config_name,
            retain_all_variant_properties=True,
        )
        self._autoscale(deployment, endpoint)
        cdk.CfnOutput(self, "EndpointName", value=endpoint.attr_endpoint_name)

    def _weights_source(
        self, deployment: SpeechDeployment, foundation: SpeechFoundationStack
    ) -> sagemaker.CfnModel.ModelDataSourceProperty | None:
        """None: the image's baked-in weights. A variant: uploaded now, copied to /opt/ml/model."""
        if deployment.weights_dir is None:
            return None
        prefix = f"{deployment.model}/{deployment.weights_variant}/"
        upload = s3_deployment.BucketDeployment(
            self,
            "WeightsUpload",
            sources=[s3_deployment.Source.asset(str(deployment.weights_dir))],
            destination_bucket=foundation.bucket,
            destination_key_prefix=prefix,
            prune=True,
            memory_limit=1024,
        )
        return sagemaker.CfnModel.ModelDataSourceProperty(
            s3_data_source=sagemaker.CfnModel.S3DataSourceProperty(
                s3_uri=f"s3://{upload.deployed_bucket.bucket_name}/{prefix}",
                s3_data_type="S3Prefix",
                compression_type="None",
            )
        )

    def _autoscaling_role_arn(self) -> str:
        """Application Auto Scaling's service-linked role for SageMaker (created on first use)."""
        return self.format_arn(
            service="iam",
            region="",
            resource="role",
            resource_name="aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
            "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint",
        )

    def _autoscale(self, deployment: SpeechDeployment, endpoint: sagemaker.CfnEndpoint) -> None:
        """Scale out fast on concurrent requests per instance; scale in slowly, one at a time."""
        target = appscaling.ScalableTarget(
            self,
            "ScalableTarget",
            service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            resource_id=f"endpoint/{endpoint.attr_endpoint_name}/variant/{VARIANT_NAME}",
            min_capacity=deployment.min_instances,
            max_capacity=deployment.max_instances,
            role=iam.Role.from_role_arn(self, "AutoscalingServiceRole", self._autoscaling_role_arn()),
        )
        target.node.add_dependency(endpoint)
        target.scale_to_track_metric(
            "ScaleOutOnConcurrentRequests",
            target_value=deployment.scale_out_target,
            predefined_metric=appscaling.PredefinedMetric.SAGEMAKER_VARIANT_CONCURRENT_REQUESTS_PER_MODEL_HIGH_RESOLUTION,
            disable_scale_in=True,
            scale_out_cooldown=cdk.Duration.minutes(1),
        )
        concurrent = cloudwatch.Metric(
            namespace="AWS/SageMaker",
            metric_name="ConcurrentRequestsPerModel",
            dimensions_map={"EndpointName": deployment.endpoint_name, "VariantName": VARIANT_NAME},
            statistic="Average",
            period=cdk.Duration.minutes(1),
        )
        target.scale_on_metric(
            "ScaleInWhenIdle",
            metric=concurrent,
            scaling_steps=[
                appscaling.ScalingInterval(upper=deployment.scale_out_target * SCALE_IN_BELOW, change=-1),
                appscaling.ScalingInterval(lower=deployment.scale_out_target * SCALE_IN_BELOW, change=0),
            ],
            adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
            evaluation_periods=SCALE_IN_PERIODS,
            cooldown=cdk.Duration.minutes(10),
        )


def speech_app(deployment: SpeechDeployment, outdir: str) -> cdk.App:
    """The speech app: foundation, then the model's endpoint."""
    app = cdk.App(outdir=outdir, analytics_reporting=False)
    foundation = SpeechFoundationStack(app, FOUNDATION_STACK, deployment)
    SpeechEndpointStack(app, endpoint_stack_name(deployment.model), deployment, foundation)
    return app
