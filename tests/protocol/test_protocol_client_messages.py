"""What clients send: the WebSocket messages, the POST bodies, the OpenAI and agent requests."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib.resources import files
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicestream.protocol import (
    AGENT_MODES,
    AUDIO_FORMATS,
    MAX_REQUEST_ID_LENGTH,
    OPENAI_FORMATS,
    OPENAI_VOICE_MAP,
    SAMPLE_RATES,
    AgentRequest,
    CancelRequest,
    CloseRequest,
    ErrorCode,
    OpenAISpeechRequest,
    PostSynthesisRequest,
    ProtocolError,
    SynthesizeRequest,
    fault_frame,
    new_request_id,
    parse_agent_request,
    parse_client_message,
    parse_openai_request,
    parse_post_request,
)


def as_text(message: str) -> str:
    return message


def as_binary(message: str) -> bytes:
    return message.encode("utf-8")


FRAME_KINDS = pytest.mark.parametrize("frame", [as_text, as_binary], ids=["text", "binary"])
Frame = Callable[[str], str | bytes]


def protocol_error(call: Callable[[], object]) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        call()
    return caught.value


def assert_written_for_people(error: ProtocolError) -> None:
    """No repr quotes, no pydantic or json module wording, nothing but our own sentence."""
    leaks = ("'", "pydantic", "Input should", "validation error", "Expecting", "line 1", "column")
    assert not any(leak in error.message for leak in leaks), error.message
    assert error.message and len(error.message) < 200


# --- the WebSocket session ----------------------------------------------------------------


@FRAME_KINDS
def test_full_synthesize_message_of_the_protocol(frame: Frame) -> None:
    raw = (
        '{"type":"synthesize","text":"Hello there.","request_id":"r1","voice":"af_heart",'
        '"speed":1.0,"format":"pcm16","sample_rate":24000}'
    )
    assert parse_client_message(frame(raw)) == SynthesizeRequest(
        text="Hello there.", request_id="r1", voice="af_heart", speed=1.0
    )


@FRAME_KINDS
def test_sample_client_message_without_type_is_a_synthesis_with_defaults(frame: Frame) -> None:
    request = parse_client_message(frame('{"text":"Hi.","voice":"am_adam","speed":1.2}'))
    assert isinstance(request, SynthesizeRequest)
    assert (request.text, request.voice, request.speed) == ("Hi.", "am_adam", 1.2)
    assert (request.request_id, request.format, request.sample_rate) == (None, "pcm16", 24000)
    assert request.request_timestamp is None


@FRAME_KINDS
def test_unknown_fields_are_ignored(frame: Frame) -> None:
    raw = '{"text":"Hi.","pitch":"high","stream":true,"nested":{"a":[1,2]},"request_id":"x"}'
    assert parse_client_message(frame(raw)) == SynthesizeRequest(text="Hi.", request_id="x")


@FRAME_KINDS
def test_null_counts_as_absent(frame: Frame) -> None:
    raw = '{"type":null,"text":"Hi.","voice":null,"speed":null,"request_id":null}'
    assert parse_client_message(frame(raw)) == SynthesizeRequest(text="Hi.")


@FRAME_KINDS
def test_cancel_and_close(frame: Frame) -> None:
    assert parse_client_message(frame('{"type":"cancel","request_id":"r1"}')) == CancelRequest(
        request_id="r1"
    )
    assert parse_client_message(frame('{"type":"cancel"}')) == CancelRequest()
    assert parse_client_message(frame('{"type":"close"}')) == CloseRequest()
    assert parse_client_message(frame('{"type":"close","text":"ignored"}')) == CloseRequest()


@FRAME_KINDS
def test_every_format_and_sample_rate_and_the_speed_bounds_are_accepted(frame: Frame) -> None:
    for audio_format in AUDIO_FORMATS:
        raw = json.dumps({"text": "a", "format": audio_format})
        assert parse_client_message(frame(raw)).format == audio_format  # type: ignore[union-attr]
    for rate in SAMPLE_RATES:
        raw = json.dumps({"text": "a", "sample_rate": rate})
        assert parse_client_message(frame(raw)).sample_rate == rate  # type: ignore[union-attr]
    for speed in (0.5, 1, 2.0):
        raw = json.dumps({"text": "a", "speed": speed})
        assert parse_client_message(frame(raw)).speed == speed  # type: ignore[union-attr]


@FRAME_KINDS
def test_request_timestamp_is_kept(frame: Frame) -> None:
    raw = '{"text":"a","request_timestamp":1718000000.25}'
    assert parse_client_message(frame(raw)).request_timestamp == 1718000000.25  # type: ignore[union-attr]


BAD_MESSAGES: list[tuple[str, ErrorCode]] = [
    ("", ErrorCode.INVALID_JSON),
    ("hello", ErrorCode.INVALID_JSON),
    ('{"text":"a"', ErrorCode.INVALID_JSON),
    ("{'text':'a'}", ErrorCode.INVALID_JSON),
    ('{"text":"a","speed":NaN}', ErrorCode.INVALID_JSON),
    ('{"text":"a","speed":Infinity}', ErrorCode.INVALID_JSON),
    ('{"text":"\\ud800 lone surrogate"}', ErrorCode.INVALID_JSON),
    ('{"text":"a"} {"text":"b"}', ErrorCode.INVALID_JSON),
    ("[" * 100_000, ErrorCode.INVALID_JSON),
    ("[]", ErrorCode.INVALID_MESSAGE),
    ('["synthesize","a"]', ErrorCode.INVALID_MESSAGE),
    ('"text"', ErrorCode.INVALID_MESSAGE),
    ("42", ErrorCode.INVALID_MESSAGE),
    ("null", ErrorCode.INVALID_MESSAGE),
    ('{"type":"speak","text":"a"}', ErrorCode.INVALID_MESSAGE),
    ('{"type":"","text":"a"}', ErrorCode.INVALID_MESSAGE),
    ('{"type":5,"text":"a"}', ErrorCode.INVALID_MESSAGE),
    ('{"type":["close"]}', ErrorCode.INVALID_MESSAGE),
    ('{"text":5}', ErrorCode.INVALID_MESSAGE),
    ('{"text":["a"]}', ErrorCode.INVALID_MESSAGE),
    ('{"text":"a","voice":7}', ErrorCode.INVALID_MESSAGE),
    ('{"text":"a","request_id":7}', ErrorCode.INVALID_MESSAGE),
    ('{"text":"a","request_id":""}', ErrorCode.INVALID_MESSAGE),
    (
        '{"text":"a","request_id":"' + "r" * (MAX_REQUEST_ID_LENGTH + 1) + '"}',
        ErrorCode.INVALID_MESSAGE,
    ),
    ('{"text":"a","request_timestamp":"now"}', ErrorCode.INVALID_MESSAGE),
    ('{"type":"cancel","request_id":["r1"]}', ErrorCode.INVALID_MESSAGE),
    ("{}", ErrorCode.TEXT_REQUIRED),
    ('{"type":"synthesize"}', ErrorCode.TEXT_REQUIRED),
    ('{"text":""}', ErrorCode.TEXT_REQUIRED),
    ('{"text":" \\n\\t "}', ErrorCode.TEXT_REQUIRED),
    ('{"text":null,"voice":"af_heart"}', ErrorCode.TEXT_REQUIRED),
    ('{"text":"a","speed":0.49}', ErrorCode.INVALID_SPEED),
    ('{"text":"a","speed":2.01}', ErrorCode.INVALID_SPEED),
    ('{"text":"a","speed":0}', ErrorCode.INVALID_SPEED),
    ('{"text":"a","speed":-1}', ErrorCode.INVALID_SPEED),
    ('{"text":"a","speed":1e400}', ErrorCode.INVALID_SPEED),
    ('{"text":"a","speed":"1.0"}', ErrorCode.INVALID_SPEED),
    ('{"text":"a","speed":true}', ErrorCode.INVALID_SPEED),
    ('{"text":"a","format":"ogg"}', ErrorCode.UNSUPPORTED_FORMAT),
    ('{"text":"a","format":"PCM16"}', ErrorCode.UNSUPPORTED_FORMAT),
    ('{"text":"a","format":16}', ErrorCode.UNSUPPORTED_FORMAT),
    ('{"text":"a","sample_rate":11025}', ErrorCode.UNSUPPORTED_SAMPLE_RATE),
    ('{"text":"a","sample_rate":"24000"}', ErrorCode.UNSUPPORTED_SAMPLE_RATE),
    ('{"text":"a","sample_rate":24000.5}', ErrorCode.UNSUPPORTED_SAMPLE_RATE),
    ('{"text":"a","sample_rate":true}', ErrorCode.UNSUPPORTED_SAMPLE_RATE),
]


@FRAME_KINDS
@pytest.mark.parametrize(
    ("raw", "code"), BAD_MESSAGES, ids=[f"{c}-{i}" for i, (_, c) in enumerate(BAD_MESSAGES)]
)
def test_bad_messages_get_their_code_and_a_message_for_people(
    frame: Frame, raw: str, code: ErrorCode
) -> None:
    error = protocol_error(lambda: parse_client_message(frame(raw)))
    assert error.code == code
    assert_written_for_people(error)


@pytest.mark.parametrize("raw", [b"\xff\xfe{}", b'{"text":"caf\xe9"}', b'{"text":"\xed\xa0\x80"}'])
def test_binary_frames_that_are_not_utf8_are_invalid_json(raw: bytes) -> None:
    error = protocol_error(lambda: parse_client_message(raw))
    assert error.code == ErrorCode.INVALID_JSON
    assert_written_for_people(error)


def test_messages_name_what_is_allowed() -> None:
    def message_for(raw: str) -> str:
        return protocol_error(lambda: parse_client_message(raw)).message

    assert all(name in message_for('{"text":"a","format":"ogg"}') for name in AUDIO_FORMATS)
    assert all(str(rate) in message_for('{"text":"a","sample_rate":1}') for rate in SAMPLE_RATES)
    speed_message = message_for('{"text":"a","speed":9}')
    assert "0.5" in speed_message and "2.0" in speed_message
    assert all(kind in message_for('{"type":"nope"}') for kind in ("synthesize", "cancel", "close"))
    assert "text" in message_for("{}")


def test_error_carries_the_request_id_so_the_error_frame_can_name_the_request() -> None:
    error = protocol_error(lambda: parse_client_message('{"text":" ","request_id":"r7"}'))
    assert error.request_id == "r7"
    assert fault_frame(error).to_json() == (
        '{"type":"error","request_id":"r7","code":"text_required",'
        '"message":"text is required and must not be blank"}'
    )
    no_id = protocol_error(lambda: parse_client_message('{"text":" ","request_id":5}'))
    assert no_id.request_id is None


REQUEST_PARSERS: list[tuple[Callable[[Any], object], type, dict[str, Any]]] = [
    (parse_client_message, SynthesizeRequest, {"text": "a"}),
    (parse_client_message, CancelRequest, {"type": "cancel"}),
    (parse_post_request, PostSynthesisRequest, {"text": "a"}),
    (parse_openai_request, OpenAISpeechRequest, {"input": "a"}),
    (parse_agent_request, AgentRequest, {"prompt": "a"}),
]


@pytest.mark.parametrize(
    ("parse", "model", "valid"), REQUEST_PARSERS, ids=lambda v: getattr(v, "__name__", "")
)
def test_every_field_of_a_wrong_type_is_named_in_the_error(
    parse: Callable[[Any], object], model: type, valid: dict[str, Any]
) -> None:
    for field in model.model_fields:
        with pytest.raises(ProtocolError) as caught:
            parse(json.dumps({**valid, field: [1]}))
        assert caught.value.message.startswith(field), (field, caught.value.message)
        assert_written_for_people(caught.value)


def test_ensure_request_id_keeps_the_clients_id_and_assigns_one_otherwise() -> None:
    named = SynthesizeRequest(text="a", request_id="mine")
    assert named.ensure_request_id() is named
    assert SynthesizeRequest(text="a").ensure_request_id(lambda: "srv-1").request_id == "srv-1"
    assigned = {SynthesizeRequest(text="a").ensure_request_id().request_id for _ in range(100)}
    assert len(assigned) == 100
    assert all(isinstance(i, str) and 0 < len(i) <= MAX_REQUEST_ID_LENGTH for i in assigned)
    assert new_request_id() != new_request_id()


speech_text = st.text(min_size=1).filter(lambda t: t.strip() != "")
request_ids = st.none() | st.text(min_size=1, max_size=MAX_REQUEST_ID_LENGTH)
speeds = st.floats(min_value=0.5, max_value=2.0)


@settings(max_examples=300, deadline=None)
@given(
    text=speech_text,
    request_id=request_ids,
    voice=st.text(),
    speed=speeds,
    audio_format=st.sampled_from(AUDIO_FORMATS),
    rate=st.sampled_from(SAMPLE_RATES),
    stamp=st.none() | st.floats(allow_nan=False, allow_infinity=False),
)
def test_synthesize_request_round_trips(
    text: str,
    request_id: str | None,
    voice: str,
    speed: float,
    audio_format: str,
    rate: int,
    stamp: float | None,
) -> None:
    request = SynthesizeRequest(
        text=text,
        request_id=request_id,
        voice=voice,
        speed=speed,
        format=audio_format,  # type: ignore[arg-type]
        sample_rate=rate,  # type: ignore[arg-type]
        request_timestamp=stamp,
    )
    assert parse_client_message(request.to_json()) == request
    assert parse_client_message(request.to_json().encode()) == request


@settings(max_examples=100, deadline=None)
@given(request_id=request_ids)
def test_cancel_and_close_round_trip(request_id: str | None) -> None:
    cancel = CancelRequest(request_id=request_id)
    assert parse_client_message(cancel.to_json()) == cancel
    assert parse_client_message(CloseRequest().to_json()) == CloseRequest()


def test_client_messages_leave_out_unset_optional_fields() -> None:
    assert CancelRequest().to_json() == '{"type":"cancel"}'
    assert CloseRequest().to_json() == '{"type":"close"}'
    assert SynthesizeRequest(text="Hi.").to_json() == (
        '{"type":"synthesize","text":"Hi.","voice":"af_heart","speed":1.0,'
        '"format":"pcm16","sample_rate":24000}'
    )


# --- POST /invocations, POST /v1/audio/speech, the agent runtime ---------------------------


def test_post_request_defaults_to_streamed_wav() -> None:
    request = parse_post_request('{"text":"Hello."}')
    assert (request.format, request.stream, request.sample_rate, request.voice, request.speed) == (
        "wav",
        True,
        24000,
        "af_heart",
        1.0,
    )
    mulaw = parse_post_request(b'{"text":"a","format":"mulaw","sample_rate":8000,"stream":false}')
    assert mulaw == PostSynthesisRequest(text="a", format="mulaw", sample_rate=8000, stream=False)
    assert parse_post_request({"text": "a", "request_timestamp": 5}).request_timestamp == 5.0


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ('{"text":"a","stream":"yes"}', ErrorCode.INVALID_MESSAGE),
        ('{"text":"a","stream":1}', ErrorCode.INVALID_MESSAGE),
        ('{"voice":"af_heart"}', ErrorCode.TEXT_REQUIRED),
        ('{"text":"a","format":"ogg"}', ErrorCode.UNSUPPORTED_FORMAT),
        ('{"text":"a","sample_rate":96000}', ErrorCode.UNSUPPORTED_SAMPLE_RATE),
        ('{"text":"a","speed":5}', ErrorCode.INVALID_SPEED),
        ("[]", ErrorCode.INVALID_MESSAGE),
        ("{", ErrorCode.INVALID_JSON),
    ],
)
def test_post_request_errors(body: str, code: ErrorCode) -> None:
    error = protocol_error(lambda: parse_post_request(body))
    assert error.code == code
    assert_written_for_people(error)


def test_http_error_body() -> None:
    error = protocol_error(lambda: parse_post_request('{"text":"a","format":"ogg"}'))
    body = json.loads(fault_frame(error).to_http_json())
    assert body == {"error": {"code": "unsupported_format", "message": error.message}}


def test_openai_request_defaults_and_voice_mapping() -> None:
    request = parse_openai_request('{"model":"tts-1","input":"Hello.","voice":"nova"}')
    assert (request.response_format, request.audio_format, request.kokoro_voice) == (
        "mp3",
        "mp3",
        "af_nova",
    )
    assert parse_openai_request('{"input":"a","voice":"am_liam"}').kokoro_voice == "am_liam"
    pcm = parse_openai_request('{"input":"a","response_format":"pcm","stream_format":"sse"}')
    assert (pcm.audio_format, pcm.stream_format) == ("pcm16", "sse")
    for openai_format in OPENAI_FORMATS:
        body = json.dumps({"input": "a", "response_format": openai_format})
        assert parse_openai_request(body).response_format == openai_format


def test_openai_instructions_are_accepted_and_ignored() -> None:
    request = parse_openai_request(
        '{"model":"gpt-4o-mini-tts","input":"a","voice":"coral","instructions":"Speak warmly."}'
    )
    assert request == OpenAISpeechRequest(model="gpt-4o-mini-tts", input="a", voice="coral")


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ('{"input":"a","speed":0.25}', ErrorCode.INVALID_SPEED),
        ('{"input":"a","speed":4.0}', ErrorCode.INVALID_SPEED),
        ('{"input":"a","response_format":"pcm16"}', ErrorCode.UNSUPPORTED_FORMAT),
        ('{"input":"a","response_format":"mulaw"}', ErrorCode.UNSUPPORTED_FORMAT),
        ('{"input":"a","stream_format":"chunks"}', ErrorCode.INVALID_MESSAGE),
        ('{"model":"tts-1","voice":"alloy"}', ErrorCode.TEXT_REQUIRED),
        ('{"input":"   "}', ErrorCode.TEXT_REQUIRED),
        ('{"text":"a"}', ErrorCode.TEXT_REQUIRED),
    ],
)
def test_openai_request_errors(body: str, code: ErrorCode) -> None:
    error = protocol_error(lambda: parse_openai_request(body))
    assert error.code == code
    assert_written_for_people(error)


def test_openai_speed_error_explains_the_narrower_range() -> None:
    message = protocol_error(lambda: parse_openai_request('{"input":"a","speed":3}')).message
    assert "0.5" in message and "2.0" in message and "4.0" in message


def test_openai_voice_map_covers_openais_voices_with_voices_kokoro_ships() -> None:
    openai_voices = {"alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage"}
    assert set(OPENAI_VOICE_MAP) == openai_voices | {"shimmer", "verse"}
    manifest = json.loads((files("voicestream") / "engine" / "voice_manifest.json").read_text())
    assert set(OPENAI_VOICE_MAP.values()) <= set(manifest["sha256"])


def test_agent_request() -> None:
    assert parse_agent_request('{"prompt":"Tell me a joke."}') == AgentRequest(
        prompt="Tell me a joke.", mode="bidi", voice="af_heart", speed=1.0
    )
    for mode in AGENT_MODES:
        assert parse_agent_request({"prompt": "a", "mode": mode}).mode == mode
    assert parse_agent_request({"prompt": "a", "session": "s1"}) == AgentRequest(prompt="a")
    heard = parse_agent_request({"prompt": "a", "interrupted": {"request_id": "r1", "heard_ms": 1500}})
    assert heard.interrupted is not None
    assert (heard.interrupted.request_id, heard.interrupted.heard_ms) == ("r1", 1500.0)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ('{"prompt":"a","mode":"stream"}', ErrorCode.INVALID_MESSAGE),
        ('{"prompt":""}', ErrorCode.TEXT_REQUIRED),
        ('{"mode":"bidi"}', ErrorCode.TEXT_REQUIRED),
        ('{"prompt":"a","speed":0.1}', ErrorCode.INVALID_SPEED),
        ('{"prompt":"a","voice":false}', ErrorCode.INVALID_MESSAGE),
        ('{"prompt":"a","interrupted":{"heard_ms":-1}}', ErrorCode.INVALID_MESSAGE),
        ('{"prompt":"a","interrupted":{"request_id":"r1"}}', ErrorCode.INVALID_MESSAGE),
        ('{"prompt":"a","interrupted":{"heard_ms":"5"}}', ErrorCode.INVALID_MESSAGE),
        ("prompt", ErrorCode.INVALID_JSON),
    ],
)
def test_agent_request_errors(body: str, code: ErrorCode) -> None:
    error = protocol_error(lambda: parse_agent_request(body))
    assert error.code == code
    assert_written_for_people(error)


def test_agent_mode_error_names_the_modes() -> None:
    message = protocol_error(lambda: parse_agent_request('{"prompt":"a","mode":"x"}')).message
    assert all(mode in message for mode in AGENT_MODES)


def test_protocol_and_audio_layers_agree_on_formats_and_rates() -> None:
    from voicestream.audio import SUPPORTED_FORMATS, SUPPORTED_SAMPLE_RATES
    from voicestream.protocol import AUDIO_FORMATS, SAMPLE_RATES

    assert set(AUDIO_FORMATS) == set(SUPPORTED_FORMATS)
    assert set(SAMPLE_RATES) == set(SUPPORTED_SAMPLE_RATES)
