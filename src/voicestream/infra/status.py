"""What is deployed, read from AWS: the speech endpoint and the agent runtime.

Each function takes a boto3 client, so that the tests can hand it one wired to botocore's
Stubber with the services' own response shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError


@dataclass(frozen=True)
class VariantStatus:
    name: str
    current_instances: int | None
    desired_instances: int | None


@dataclass(frozen=True)
class EndpointStatus:
    name: str
    status: str | None
    """SageMaker's EndpointStatus (InService, Creating, Updating, Failed...); None: not deployed."""
    variants: list[VariantStatus] = field(default_factory=list)
    failure_reason: str | None = None

    @property
    def instances(self) -> int:
        return sum(v.current_instances or 0 for v in self.variants)

    def lines(self) -> list[str]:
        if self.status is None:
            return [f"endpoint   {self.name}", "status     not deployed"]
        lines = [f"endpoint   {self.name}", f"status     {self.status}", f"instances  {self.instances}"]
        lines += [
            f"variant    {v.name}: current {_count(v.current_instances)}, desired {_count(v.desired_instances)}"
            for v in self.variants
        ]
        if self.failure_reason:
            lines.append(f"failure    {self.failure_reason}")
        return lines


@dataclass(frozen=True)
class RuntimeStatus:
    name: str
    status: str | None
    """AgentCore's status (READY, CREATING, UPDATING, CREATE_FAILED...); None: not deployed."""
    arn: str | None = None
    version: str | None = None
    failure_reason: str | None = None

    def lines(self) -> list[str]:
        if self.status is None:
            return [f"runtime    {self.name}", "status     not deployed"]
        lines = [f"runtime    {self.name}", f"status     {self.status}", f"arn        {self.arn}"]
        if self.version:
            lines.append(f"version    {self.version}")
        if self.failure_reason:
            lines.append(f"failure    {self.failure_reason}")
        return lines


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


def endpoint_status(sagemaker: Any, name: str) -> EndpointStatus:
    """DescribeEndpoint; an endpoint SageMaker cannot find is reported as not deployed."""
    try:
        response = sagemaker.describe_endpoint(EndpointName=name)
    except ClientError as error:
        details = error.response.get("Error", {})
        if details.get("Code") == "ValidationException" and "Could not find endpoint" in details.get("Message", ""):
            return EndpointStatus(name, None)
        raise
    variants = [
        VariantStatus(v["VariantName"], v.get("CurrentInstanceCount"), v.get("DesiredInstanceCount"))
        for v in response.get("ProductionVariants", [])
    ]
    return EndpointStatus(name, response["EndpointStatus"], variants, response.get("FailureReason"))


def runtime_status(control: Any, name: str) -> RuntimeStatus:
    """Find the runtime by name (ListAgentRuntimes), then GetAgentRuntime for its details."""
    runtime_id = None
    for page in control.get_paginator("list_agent_runtimes").paginate():
        for runtime in page.get("agentRuntimes", []):
            if runtime["agentRuntimeName"] == name:
                runtime_id = runtime["agentRuntimeId"]
    if runtime_id is None:
        return RuntimeStatus(name, None)
    response = control.get_agent_runtime(agentRuntimeId=runtime_id)
    return RuntimeStatus(
        name,
        response["status"],
        response["agentRuntimeArn"],
        response.get("agentRuntimeVersion"),
        response.get("failureReason"),
    )


def stack_outputs(cloudformation: Any, name: str) -> dict[str, str] | None:
    """A stack's outputs by key; None when no stack of that name exists (deleted ones are not found)."""
    try:
        response = cloudformation.describe_stacks(StackName=name)
    except ClientError as error:
        details = error.response.get("Error", {})
        if details.get("Code") == "ValidationError" and "does not exist" in details.get("Message", ""):
            return None
        raise
    (stack,) = response["Stacks"]
    return {output["OutputKey"]: output["OutputValue"] for output in stack.get("Outputs", [])}
