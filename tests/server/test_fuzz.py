"""Fuzzing the bidirectional session: malformed messages interleaved with valid requests on
several concurrent sessions. The server never crashes, each bad message gets its code, and
every valid request gets its complete audio (requests in == `synthesis_complete` out)."""

from __future__ import annotations

import asyncio
import json

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from voicestream.bench.chaos import AUDIO, Probe, fuzz, run_probes, valid_probe

TEXT = st.characters(exclude_categories=("Cs",))
"""No lone surrogates: a WebSocket text frame cannot carry one (and JSON-escaped they are
`invalid_json`, tested in the protocol layer)."""
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), FLOATS, st.text(TEXT, max_size=8))


def _not_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return True
    return False


BAD = st.one_of(
    st.binary(min_size=1, max_size=64).filter(lambda b: not _is_utf8(b)).map(lambda b: Probe(b, "invalid_json")),
    st.text(TEXT, min_size=1, max_size=40).filter(_not_json).map(lambda t: Probe(t, "invalid_json")),
    st.one_of(JSON_SCALARS, st.lists(JSON_SCALARS, max_size=3)).map(lambda v: Probe(json.dumps(v), "invalid_message")),
    st.one_of(st.integers(), st.lists(st.integers(), max_size=2), st.booleans()).map(
        lambda v: Probe(json.dumps({"text": v}), "invalid_message")
    ),
    st.integers(20_001, 60_000).map(lambda n: Probe(json.dumps({"text": "a" * n}), "text_too_long")),
    st.text(alphabet=" \t\n", max_size=5).map(lambda t: Probe(json.dumps({"text": t}), "text_required")),
    FLOATS.filter(lambda s: not 0.5 <= s <= 2.0).map(
        lambda s: Probe(json.dumps({"text": "Hi.", "speed": s}), "invalid_speed")
    ),
)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _session_plan(bad: list[Probe], valid_at: list[int], prefix: str) -> list[Probe]:
    plan = list(bad)
    for number, position in enumerate(sorted(valid_at)):
        plan.insert(min(position, len(plan)), valid_probe(f"{prefix}{number}", "Hi."))
    return plan


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    plans=st.lists(
        st.tuples(st.lists(BAD, max_size=12), st.lists(st.integers(0, 12), min_size=1, max_size=2)),
        min_size=3,
        max_size=3,
    )
)
def test_fuzzed_sessions_get_every_answer(speech_server: str, plans) -> None:
    sessions = [_session_plan(bad, valid_at, f"p{index}-") for index, (bad, valid_at) in enumerate(plans)]

    async def run() -> list:
        return list(await asyncio.gather(*(run_probes(speech_server, plan, 60) for plan in sessions)))

    for plan, report in zip(sessions, asyncio.run(run()), strict=True):
        assert report.mismatches == []
        assert report.completed == report.valid_sent == sum(p.expect == AUDIO for p in plan)
        assert sum(report.errors.values()) == len(plan) - report.valid_sent
    assert httpx.get(f"{speech_server}/ping").status_code == 200


async def test_thousands_of_tiny_messages_then_a_request(speech_server: str) -> None:
    plan = [Probe("x", "invalid_json")] * 2000 + [valid_probe("after-flood", "Hi.")]
    report = await run_probes(speech_server, plan, 60)
    assert report.mismatches == [] and report.completed == 1
    assert report.errors == {"invalid_json": 2000}


async def test_seeded_fuzz_over_concurrent_sessions(speech_server: str) -> None:
    """The same generator `voicestream bench chaos` uses, at a CI size."""
    reports = await fuzz(speech_server, sessions=3, messages=10, seed=11)
    assert [r.mismatches for r in reports] == [[]] * 3
    assert sum(r.completed for r in reports) == sum(r.valid_sent for r in reports) > 0
