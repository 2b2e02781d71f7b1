"""Settings dataclasses read from the environment, one variable per field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def fields_from_env(cls: type, env: Mapping[str, str]) -> dict[str, Any]:
    """The fields of the dataclass `cls` that `env` sets, as VOICESTREAM_<FIELD NAME>, each
    converted to the type of the field's default."""
    defaults = cls()
    values: dict[str, Any] = {}
    for name in cls.__dataclass_fields__:  # type: ignore[attr-defined]
        raw = env.get(f"VOICESTREAM_{name.upper()}")
        if raw:
            values[name] = type(getattr(defaults, name))(raw)
    return values
