"""PROTOCOL.md 1.3: a chunk is a control frame iff the whole chunk is UTF-8 JSON of an object."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from voicestream.protocol import decode_control_frame


def is_control_frame_by_definition(chunk: bytes) -> bool:
    """The rule of PROTOCOL.md 1.3 read literally, with no shortcut."""
    try:
        return isinstance(json.loads(chunk.decode("utf-8")), dict)
    except (ValueError, RecursionError):
        return False


def brace_wrapped(samples: np.ndarray) -> bytes:
    """PCM forced to start with `{` (0x7b) and to end with `}` (0x7d)."""
    raw = bytearray(samples.astype("<i2").tobytes())
    raw[0], raw[-1] = 0x7B, 0x7D
    return bytes(raw)


@pytest.mark.parametrize(
    ("chunk", "expected"),
    [
        (b'{"type":"close"}', {"type": "close"}),
        (b' \r\n\t{"type":"cancel","request_id":"r1"}\n', {"type": "cancel", "request_id": "r1"}),
        ('{"text":"caf\u00e9 \U0001f600"}'.encode(), {"text": "caf\u00e9 \U0001f600"}),
        (b"{}", {}),
    ],
)
def test_json_objects_are_control_frames(chunk: bytes, expected: dict[str, Any]) -> None:
    assert decode_control_frame(chunk) == expected
    assert decode_control_frame(bytearray(chunk)) == expected
    assert decode_control_frame(memoryview(chunk)) == expected


@pytest.mark.parametrize(
    "chunk",
    [
        b"",
        b"   ",
        b"[1,2]",
        b'"close"',
        b"42",
        b"null",
        b'{"type":"close"',
        b'"type":"close"}',
        b'{"a":1}{"b":2}',
        b'{"a":1} x',
        b'{"speed":NaN}',
        b"{\x00\x01}",
        b'{"text":"caf\xe9"}',
        b'\xef\xbb\xbf{"type":"close"}',
        b'{"a":' + b"[" * 100_000 + b"}",
        b"{" + bytes(range(256)) * 40 + b"}",
    ],
)
def test_everything_else_is_audio(chunk: bytes) -> None:
    assert decode_control_frame(chunk) is None


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1), samples=st.integers(8, 12_000), amplitude=st.integers(1, 32767)
)
def test_random_pcm_is_never_taken_for_control(seed: int, samples: int, amplitude: int) -> None:
    rng = np.random.default_rng(seed)
    noise = rng.integers(-amplitude, amplitude, samples, endpoint=True, dtype=np.int16)
    assert decode_control_frame(noise.tobytes()) is None
    assert decode_control_frame(brace_wrapped(noise)) is None


@settings(max_examples=100, deadline=None)
@given(hz=st.floats(50, 4000), samples=st.integers(8, 12_000), amplitude=st.integers(1, 32767))
def test_speech_like_pcm_that_starts_with_a_brace_is_audio(
    hz: float, samples: int, amplitude: int
) -> None:
    t = np.arange(samples) / 24_000
    tone = (amplitude * np.sin(2 * math.pi * hz * t)).astype(np.int16)
    assert decode_control_frame(brace_wrapped(tone)) is None


@settings(max_examples=300, deadline=None)
@given(samples=arrays(np.int16, st.integers(1, 512)))
def test_decision_agrees_with_the_literal_rule_for_any_int16_array(samples: np.ndarray) -> None:
    """Tiny or contrived arrays can spell JSON (`{}` is 32123): the rule, not luck, decides."""
    for chunk in (samples.tobytes(), brace_wrapped(samples)):
        assert (decode_control_frame(chunk) is not None) == is_control_frame_by_definition(chunk)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=10,
)
blank = st.text(alphabet=" \t\r\n", max_size=3)


@settings(max_examples=300, deadline=None)
@given(
    value=st.dictionaries(st.text(max_size=8), json_values, max_size=6),
    ascii_only=st.booleans(),
    indent=st.none() | st.integers(0, 2),
    before=blank,
    after=blank,
)
def test_json_objects_round_trip(
    value: dict[str, Any], ascii_only: bool, indent: int | None, before: str, after: str
) -> None:
    text = before + json.dumps(value, ensure_ascii=ascii_only, indent=indent) + after
    assert decode_control_frame(text.encode("utf-8")) == value
