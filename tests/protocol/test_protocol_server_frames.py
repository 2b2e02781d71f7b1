"""What the speech server and the agent runtime send: exact JSON, and round trips."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicestream.protocol import (
    AGENT_MODES,
    AUDIO_FORMATS,
    AgentEnd,
    AgentError,
    AgentStart,
    AudioChunk,
    AudioEvent,
    AudioStreamEnd,
    AudioStreamStart,
    ErrorCode,
    ErrorFrame,
    ProtocolError,
    SynthesisCancelled,
    SynthesisComplete,
    SynthesisStart,
    TextDelta,
    WireModel,
    parse_agent_event,
    parse_server_frame,
)


def test_server_frames_are_exactly_the_protocols_json() -> None:
    start = SynthesisStart(request_id="r1", format="pcm16", sample_rate=24000)
    assert start.to_json() == (
        '{"type":"synthesis_start","request_id":"r1","format":"pcm16","sample_rate":24000,"channels":1}'
    )
    complete = SynthesisComplete(
        request_id="r1", audio_bytes=48000, total_duration_s=1.0, elapsed_s=0.25
    )
    assert complete.to_json() == (
        '{"type":"synthesis_complete","request_id":"r1","audio_bytes":48000,'
        '"total_duration_s":1.0,"elapsed_s":0.25}'
    )
    with_extension = complete.model_copy(update={"first_audio_ms": 41.5})
    assert json.loads(with_extension.to_json())["first_audio_ms"] == 41.5
    assert ErrorFrame(
        request_id="r1", code=ErrorCode.BUSY, message="Too many requests."
    ).to_json() == (
        '{"type":"error","request_id":"r1","code":"busy","message":"Too many requests."}'
    )
    assert ErrorFrame(code="invalid_json", message="m").to_json() == (
        '{"type":"error","code":"invalid_json","message":"m"}'
    )
    assert SynthesisCancelled(request_id="r1").to_json() == (
        '{"type":"synthesis_cancelled","request_id":"r1"}'
    )


def test_audio_event_carries_base64() -> None:
    event = AudioEvent.from_audio(3, b"\x00\x01\xfe\xff")
    assert event.to_json() == '{"type":"audio","seq":3,"data":"AAH+/w=="}'
    assert event.audio() == b"\x00\x01\xfe\xff"


def test_agent_events_carry_type_request_id_and_t_ms_first() -> None:
    event = TextDelta(request_id="a1", t_ms=12.5, seq=0, text="Hello")
    assert (
        event.to_json()
        == '{"type":"text_delta","request_id":"a1","t_ms":12.5,"seq":0,"text":"Hello"}'
    )
    assert AgentEnd(request_id="a1", t_ms=900.0, ttft_ms=120.0).to_json() == (
        '{"type":"agent_end","request_id":"a1","t_ms":900.0,"ttft_ms":120.0}'
    )


def test_error_codes_are_the_protocols() -> None:
    speech_codes = {
        "invalid_json",
        "invalid_message",
        "text_required",
        "text_too_long",
        "unknown_voice",
        "unsupported_format",
        "unsupported_sample_rate",
        "invalid_speed",
        "busy",
        "request_stale",
        "internal",
    }
    assert speech_codes <= {code.value for code in ErrorCode}
    assert ErrorCode("busy") is ErrorCode.BUSY and ErrorCode.BUSY == "busy"


def test_a_newer_servers_error_code_still_parses() -> None:
    frame = parse_server_frame('{"type":"error","code":"quota_exceeded","message":"m","extra":1}')
    assert frame == ErrorFrame(code="quota_exceeded", message="m")


@pytest.mark.parametrize(
    "raw",
    [
        '{"type":"synthesis_begin","request_id":"r1"}',
        '{"type":"synthesis_start","request_id":"r1"}',
        '{"request_id":"r1"}',
        (
            '{"type":"synthesis_complete","request_id":"r1","audio_bytes":"many",'
            '"total_duration_s":1,"elapsed_s":1}'
        ),
    ],
)
def test_unknown_or_incomplete_server_frames_are_refused(raw: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_server_frame(raw)
    assert caught.value.code == ErrorCode.INVALID_MESSAGE
    assert "synthesis_start" in caught.value.message and "'" not in caught.value.message


def test_unknown_agent_events_are_refused() -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_agent_event('{"type":"thinking","request_id":"a","t_ms":1}')
    assert caught.value.code == ErrorCode.INVALID_MESSAGE
    assert "audio_chunk" in caught.value.message


ids = st.text(min_size=1, max_size=40)
counts = st.integers(min_value=0, max_value=2**53)
seconds = st.floats(min_value=0, max_value=1e9)
milliseconds = st.floats(min_value=0, max_value=1e9)
optional_ms = st.none() | milliseconds
base64_audio = st.binary(max_size=64).map(lambda b: AudioEvent.from_audio(0, b).data)

server_frames = st.one_of(
    st.builds(
        SynthesisStart,
        request_id=ids,
        format=st.sampled_from(AUDIO_FORMATS),
        sample_rate=st.integers(8000, 48000),
        channels=st.integers(1, 2),
    ),
    st.builds(
        SynthesisComplete,
        request_id=ids,
        audio_bytes=counts,
        total_duration_s=seconds,
        elapsed_s=seconds,
        first_audio_ms=optional_ms,
    ),
    st.builds(
        ErrorFrame,
        request_id=st.none() | ids,
        code=st.sampled_from(list(ErrorCode)),
        message=st.text(),
    ),
    st.builds(SynthesisCancelled, request_id=ids),
    st.builds(AudioEvent, seq=counts, data=base64_audio),
)

agent_events = st.one_of(
    st.builds(AgentStart, request_id=ids, t_ms=milliseconds, mode=st.sampled_from(AGENT_MODES)),
    st.builds(TextDelta, request_id=ids, t_ms=milliseconds, seq=counts, text=st.text()),
    st.builds(
        AudioStreamStart,
        request_id=ids,
        t_ms=milliseconds,
        format=st.sampled_from(AUDIO_FORMATS),
        sample_rate=st.integers(8000, 48000),
        voice=st.text(),
    ),
    st.builds(
        AudioChunk,
        request_id=ids,
        t_ms=milliseconds,
        seq=counts,
        data=base64_audio,
        sentence=counts,
    ),
    st.builds(
        AudioStreamEnd, request_id=ids, t_ms=milliseconds, total_chunks=counts, duration_s=seconds
    ),
    st.builds(
        AgentEnd, request_id=ids, t_ms=milliseconds, ttft_ms=optional_ms, ttfa_ms=optional_ms
    ),
    st.builds(
        AgentError,
        request_id=ids,
        t_ms=milliseconds,
        code=st.sampled_from(list(ErrorCode)),
        message=st.text(),
    ),
)


def assert_no_null_fields(model: WireModel) -> None:
    assert None not in json.loads(model.to_json()).values()


@settings(max_examples=300, deadline=None)
@given(frame=server_frames)
def test_server_frames_round_trip(frame: WireModel) -> None:
    assert parse_server_frame(frame.to_json()) == frame
    assert parse_server_frame(frame.to_json().encode()) == frame
    assert_no_null_fields(frame)


@settings(max_examples=300, deadline=None)
@given(event=agent_events)
def test_agent_events_round_trip(event: WireModel) -> None:
    assert parse_agent_event(event.to_json()) == event
    decoded = json.loads(event.to_json())
    assert list(decoded)[:3] == ["type", "request_id", "t_ms"]
    assert_no_null_fields(event)


def test_audio_chunk_decodes_its_audio() -> None:
    chunk = AudioChunk(
        request_id="a", t_ms=1, seq=0, data=AudioEvent.from_audio(0, b"pcm!").data, sentence=2
    )
    assert chunk.audio() == b"pcm!"
