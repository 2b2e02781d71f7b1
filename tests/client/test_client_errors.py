"""The error hierarchy: every protocol code lands on the class a caller would catch."""

from __future__ import annotations

import pytest

from voicestream.client import (
    ConnectionLostError,
    InvalidRequestError,
    RequestStaleError,
    ServerError,
    SpeechBusyError,
    SpeechError,
    error_from_frame,
    error_from_http,
)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("busy", SpeechBusyError),
        ("request_stale", RequestStaleError),
        ("invalid_json", InvalidRequestError),
        ("invalid_message", InvalidRequestError),
        ("text_required", InvalidRequestError),
        ("text_too_long", InvalidRequestError),
        ("unknown_voice", InvalidRequestError),
        ("unsupported_format", InvalidRequestError),
        ("unsupported_sample_rate", InvalidRequestError),
        ("invalid_speed", InvalidRequestError),
        ("internal", ServerError),
        ("a_code_from_a_newer_server", ServerError),
    ],
)
def test_error_from_frame_maps_each_code(code: str, expected: type[SpeechError]) -> None:
    error = error_from_frame(code, "Something people can read.", "r1")
    assert type(error) is expected
    assert isinstance(error, SpeechError)
    assert (error.code, error.message, error.request_id) == (
        code,
        "Something people can read.",
        "r1",
    )
    assert str(error) == "Something people can read."


def test_client_side_errors_carry_their_own_code() -> None:
    assert ConnectionLostError("the line went dead").code == "connection_lost"
    assert SpeechBusyError("full").code == "busy"


def test_error_from_http_reads_the_protocol_body() -> None:
    body = b'{"error":{"code":"text_too_long","message":"At most 5000 characters."}}'
    error = error_from_http(413, body)
    assert isinstance(error, InvalidRequestError)
    assert (error.code, error.message) == ("text_too_long", "At most 5000 characters.")


def test_error_bodies_of_other_servers_still_name_the_status() -> None:
    assert isinstance(error_from_http(503, b"<html>Service Unavailable</html>"), SpeechBusyError)
    proxy_error = error_from_http(502, b"Bad Gateway")
    assert isinstance(proxy_error, ServerError) and proxy_error.code == "http_502"
