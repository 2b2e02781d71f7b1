"""Reading IAM out of a synthesized template: every statement, with its role, actions and resources."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

UNSCOPABLE = {"ecr:GetAuthorizationToken"}
"""Actions IAM only grants on Resource "*" (no resource-level permissions exist for them)."""
LAMBDA_LOGS = ":iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
"""The one managed policy allowed: a CDK-provided function's own logs (the weights upload)."""


@dataclass(frozen=True)
class Statement:
    role: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    """Each resource rendered as JSON text (intrinsic functions included)."""
    effect: str


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _role_ids(roles: list[Any]) -> list[str]:
    return [role["Ref"] for role in roles]


def statements(template: dict[str, Any]) -> list[Statement]:
    """Every statement of every IAM policy in the template, attributed to its role's logical id."""
    found = []
    for logical_id, resource in template["Resources"].items():
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::IAM::Policy":
            documents = [(role, properties["PolicyDocument"]) for role in _role_ids(properties["Roles"])]
        elif resource["Type"] == "AWS::IAM::Role":
            documents = [(logical_id, p["PolicyDocument"]) for p in properties.get("Policies", [])]
            for arn in properties.get("ManagedPolicyArns", []):
                assert json.dumps(arn).endswith(LAMBDA_LOGS + '"]]}'), f"{logical_id} has the managed policy {arn}"
        else:
            continue
        for role, document in documents:
            for statement in document["Statement"]:
                found.append(
                    Statement(
                        role,
                        tuple(_as_list(statement["Action"])),
                        tuple(json.dumps(r, sort_keys=True) for r in _as_list(statement["Resource"])),
                        statement["Effect"],
                    )
                )
    return found


def actions_of(template: dict[str, Any], role: str) -> set[str]:
    return {action for s in statements(template) if s.role == role for action in s.actions}


def resources_of(template: dict[str, Any], role: str, action: str) -> list[str]:
    return [r for s in statements(template) if s.role == role and action in s.actions for r in s.resources]


def assert_least_privilege(template: dict[str, Any]) -> None:
    """Allow only, no `*` or `service:*` action, and Resource "*" only where IAM allows nothing else."""
    for statement in statements(template):
        assert statement.effect == "Allow", statement
        for action in statement.actions:
            assert action != "*" and not action.endswith(":*"), statement
        if '"*"' in statement.resources:
            assert set(statement.actions) <= UNSCOPABLE, statement
