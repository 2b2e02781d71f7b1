"""Strict JSON reading shared by the message parsers and the control-frame decoder."""

from __future__ import annotations

import json
from typing import Any


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def loads_strict(text: str) -> Any:
    """`json.loads` without Python's NaN and Infinity, which no other JSON reader accepts.

    Raises ValueError for text that is not JSON and RecursionError for absurd nesting.
    """
    return json.loads(text, parse_constant=_reject_constant)
