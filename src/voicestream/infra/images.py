"""The container images the stacks run, and least-privilege pulls of them.

An image is either built from this repository's Dockerfile at deploy time (a CDK
`DockerImageAsset`, pushed to the CDK bootstrap's container-assets repository) or an
existing ECR image given with `--image-uri`. Either way the role that runs it may pull from
that one repository only.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from constructs import Construct

from voicestream.infra.config import ConfigError, repository_name

REPO_ROOT = Path(__file__).resolve().parents[3]
"""The repository root: the Docker build context (its .dockerignore keeps it small)."""
BOOTSTRAP_REPOSITORY = (
    f"cdk-{cdk.DefaultStackSynthesizer.DEFAULT_QUALIFIER}-container-assets-${{AWS::AccountId}}-${{AWS::Region}}"
)
"""Where `cdk deploy` pushes image assets (the default bootstrap's repository)."""


def image_asset(scope: Construct, construct_id: str, dockerfile: str, platform: ecr_assets.Platform,
                build_args: dict[str, str] | None = None) -> ecr_assets.DockerImageAsset:
    """Build docker/<dockerfile> from the repository root at deploy time."""
    if not (REPO_ROOT / "docker" / dockerfile).is_file():
        raise ConfigError(
            f"docker/{dockerfile} is not here (voicestream is installed, not a clone): pass --image-uri"
        )
    return ecr_assets.DockerImageAsset(
        scope,
        construct_id,
        directory=str(REPO_ROOT),
        file=f"docker/{dockerfile}",
        platform=platform,
        build_args=build_args,
        ignore_mode=cdk.IgnoreMode.DOCKER,
    )


def repository_arn(scope: Construct, image_uri: str | None) -> str:
    """The ARN of the repository an image comes from: --image-uri's, else the bootstrap's."""
    name = repository_name(image_uri) if image_uri else BOOTSTRAP_REPOSITORY
    return cdk.Fn.sub(f"arn:${{AWS::Partition}}:ecr:${{AWS::Region}}:${{AWS::AccountId}}:repository/{name}")


def pull_statements(repository: str) -> list[iam.PolicyStatement]:
    """Pull one repository's images. GetAuthorizationToken has no resource-level scope in IAM."""
    return [
        iam.PolicyStatement(
            sid="PullImage",
            actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
            resources=[repository],
        ),
        iam.PolicyStatement(sid="EcrLogin", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
    ]


def log_statement(log_group_arn: str) -> iam.PolicyStatement:
    """Create and write one log group (or the groups one name pattern matches) and its streams."""
    return iam.PolicyStatement(
        sid="WriteLogs",
        actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
        resources=[log_group_arn, f"{log_group_arn}:*"],
    )
