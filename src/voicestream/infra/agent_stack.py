"""The agent on Amazon Bedrock AgentCore: its arm64 image, its role, and the runtime.

The role may stream from the chosen Bedrock model and open bidirectional streams on the
speech endpoint, and nothing else beyond pulling its image and writing its logs.
"""

from __future__ import annotations

import re

import aws_cdk as cdk
from aws_cdk import aws_bedrockagentcore as agentcore
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from constructs import Construct

from voicestream.infra.config import AGENT_STACK, AgentDeployment, runtime_environment
from voicestream.infra.images import image_asset, log_statement, pull_statements, repository_arn

INFERENCE_PROFILE_PREFIX = re.compile(r"^(us|eu|apac|jp|au|ca|us-gov|global)\.(.+)$")
"""Cross-region inference profile ids: `us.anthropic.claude-...`; the rest is the model id."""


def model_arns(stack: cdk.Stack, model_id: str) -> list[str]:
    """What bedrock:InvokeModelWithResponseStream needs for a model or an inference profile.

    A profile routes to the same foundation model in several regions, so the model's ARN is
    granted in any region, for that one model only.
    """
    profile = INFERENCE_PROFILE_PREFIX.match(model_id)
    if profile is None:
        return [stack.format_arn(service="bedrock", account="", resource="foundation-model", resource_name=model_id)]
    return [
        stack.format_arn(service="bedrock", resource="inference-profile", resource_name=model_id),
        stack.format_arn(
            service="bedrock", region="*", account="", resource="foundation-model", resource_name=profile.group(2)
        ),
    ]


class AgentStack(cdk.Stack):
    """The AgentCore runtime running docker/agent.Dockerfile."""

    def __init__(self, scope: Construct, construct_id: str, deployment: AgentDeployment, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)
        image_uri = deployment.image_uri or image_asset(
            self, "AgentImage", "agent.Dockerfile", ecr_assets.Platform.LINUX_ARM64
        ).image_uri
        role = iam.Role(
            self,
            "RuntimeRole",
            assumed_by=iam.ServicePrincipal(
                "bedrock-agentcore.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": self.account}},
            ),
            description=f"Runs the {deployment.runtime_name} AgentCore runtime.",
        )
        for statement in pull_statements(repository_arn(self, deployment.image_uri)):
            role.add_to_policy(statement)
        role.add_to_policy(
            iam.PolicyStatement(
                sid="StreamFromTheModel",
                actions=["bedrock:InvokeModelWithResponseStream"],
                resources=model_arns(self, deployment.bedrock_model_id),
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="SpeakThroughTheEndpoint",
                actions=["sagemaker:InvokeEndpointWithBidirectionalStream"],
                resources=[
                    self.format_arn(service="sagemaker", resource="endpoint", resource_name=deployment.speech_endpoint)
                ],
            )
        )
        role.add_to_policy(log_statement(self._runtime_log_groups(deployment.runtime_name)))
        runtime = agentcore.CfnRuntime(
            self,
            "Runtime",
            agent_runtime_name=deployment.runtime_name,
            agent_runtime_artifact=agentcore.CfnRuntime.AgentRuntimeArtifactProperty(
                container_configuration=agentcore.CfnRuntime.ContainerConfigurationProperty(container_uri=image_uri)
            ),
            network_configuration=agentcore.CfnRuntime.NetworkConfigurationProperty(network_mode="PUBLIC"),
            protocol_configuration="HTTP",
            role_arn=role.role_arn,
            environment_variables=runtime_environment(deployment, self.region),
            description="voicestream agent: speaks its answers through the speech endpoint as it writes them.",
        )
        runtime.node.add_dependency(role)
        cdk.CfnOutput(self, "AgentRuntimeArn", value=runtime.attr_agent_runtime_arn)
        cdk.CfnOutput(self, "AgentRuntimeId", value=runtime.attr_agent_runtime_id)

    def _runtime_log_groups(self, runtime_name: str) -> str:
        """AgentCore writes to /aws/bedrock-agentcore/runtimes/<runtime id>-<endpoint>; ids start with the name."""
        return self.format_arn(
            service="logs",
            resource="log-group",
            resource_name=f"/aws/bedrock-agentcore/runtimes/{runtime_name}-*",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )


def agent_app(deployment: AgentDeployment, outdir: str) -> cdk.App:
    app = cdk.App(outdir=outdir, analytics_reporting=False)
    AgentStack(app, AGENT_STACK, deployment)
    return app
