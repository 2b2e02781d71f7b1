"""The infra tests' fixtures: the default speech and agent apps, synthesized once per run."""

from tests.infra.assemblies import agent_assembly, speech_assembly  # noqa: F401 - fixtures, registered by importing them
