"""POST /invocations, the OpenAI route, /ping and /metrics against the real server."""

from __future__ import annotations

import base64
import time

import httpx
import pytest
from tests.reference import HELLO_SECONDS
from tests.server.wire import JSON_TYPE, loopback_tls

from voicestream.audio import SUPPORTED_FORMATS, decode_audio
from voicestream.protocol import SSEDecoder


def _duration(data: bytes, format: str, rate: int = 24000) -> float:
    samples, decoded_rate = decode_audio(data, format, rate)
    return len(samples) / decoded_rate


def test_ping_is_healthy(speech_server: str) -> None:
    response = httpx.get(f"{speech_server}/ping")
    assert response.status_code == 200


def test_ping_is_503_until_the_model_is_ready(engine) -> None:
    """A server loading its own model answers 503 at once, then 200 once warm."""
    from voicestream.server import ServerSettings, free_port, running_server

    settings = ServerSettings(host="127.0.0.1", port=free_port(), model_dir=engine.files.model_path.parent)
    with running_server(None, settings) as url:
        statuses = [httpx.get(f"{url}/ping").status_code]
        deadline = time.monotonic() + 60
        while statuses[-1] != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
            statuses.append(httpx.get(f"{url}/ping", verify=loopback_tls()).status_code)
    assert statuses[0] == 503 and statuses[-1] == 200


@pytest.mark.parametrize("format", SUPPORTED_FORMATS)
def test_invocations_streams_every_format(speech_server: str, format: str) -> None:
    with httpx.stream("POST", f"{speech_server}/invocations",
                      json={"text": "Hello there.", "format": format}, timeout=60) as response:
        assert response.status_code == 200
        chunks = list(response.iter_bytes())
    data = b"".join(chunks)
    tolerance = 0.12 if format in ("mp3", "aac") else 0.01
    assert _duration(data, format) == pytest.approx(HELLO_SECONDS, abs=tolerance)


def test_invocations_wav_streams_open_ended_header(speech_server: str) -> None:
    response = httpx.post(f"{speech_server}/invocations", json={"text": "Hello there."}, timeout=60)
    assert response.headers["content-type"] == "audio/wav"
    assert response.content[:4] == b"RIFF" and response.content[8:12] == b"WAVE"
    assert response.content[40:44] == b"\xff\xff\xff\xff"  # data size unknown while streaming


def test_invocations_whole_file_has_timing_headers(speech_server: str) -> None:
    response = httpx.post(f"{speech_server}/invocations",
                          json={"text": "Hello there.", "stream": False}, timeout=60)
    assert response.status_code == 200
    assert float(response.headers["X-Audio-Duration"]) == pytest.approx(HELLO_SECONDS, rel=0.03)
    assert float(response.headers["X-Inference-Time-Ms"]) > 0
    assert 0 < float(response.headers["X-RTF"]) < 5
    data_size = int.from_bytes(response.content[40:44], "little")
    assert data_size == len(response.content) - 44  # finished file: exact sizes


def test_invocations_server_sent_events(speech_server: str) -> None:
    decoder = SSEDecoder()
    events = []
    with httpx.stream("POST", f"{speech_server}/invocations", json={"text": "Hello there. How are you?",
                      "format": "pcm16"}, headers={"Accept": "text/event-stream"}, timeout=60) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for chunk in response.iter_raw():
            events += [event.json() for event in decoder.feed(chunk)]
    audio = [e for e in events if e["type"] == "audio"]
    assert [e["seq"] for e in audio] == list(range(len(audio)))
    pcm = b"".join(base64.b64decode(e["data"]) for e in audio)
    assert events[-1]["type"] == "synthesis_complete"
    assert events[-1]["audio_bytes"] == len(pcm)


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"text": ""}, 400, "text_required"),
    ({"text": "hi", "voice": "nobody"}, 400, "unknown_voice"),
    ({"text": "hi", "format": "ogg"}, 400, "unsupported_format"),
    ({"text": "hi", "speed": 3}, 400, "invalid_speed"),
    ({"text": "x" * 30_000}, 413, "text_too_long"),
])
def test_invocations_errors_are_typed(speech_server: str, body: dict, status: int, code: str) -> None:
    response = httpx.post(f"{speech_server}/invocations", json=body, timeout=30)
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


def test_a_request_that_waits_past_stale_after_is_408(make_speech_server) -> None:
    url = make_speech_server(stale_after_s=0.0)
    response = httpx.post(f"{url}/invocations", json={"text": "hi", "stream": False}, timeout=30)
    assert response.status_code == 408
    assert response.json()["error"]["code"] == "request_stale"


def test_nothing_speakable_is_a_valid_empty_wav(speech_server: str) -> None:
    """Text the normalizer reads as nothing ("-" repeated) gets a valid WAV with no frames,
    streamed or whole, never an empty body."""
    import io
    import wave

    for stream in (False, True):
        response = httpx.post(f"{speech_server}/invocations", json={"text": "-" * 2000, "stream": stream}, timeout=60)
        assert response.status_code == 200
        if stream:  # an open-ended header: sizes unknown while streaming
            assert response.content[:4] == b"RIFF" and len(response.content) == 44
        else:
            with wave.open(io.BytesIO(response.content)) as wav:
                assert wav.getnframes() == 0 and wav.getframerate() == 24000


def test_invocations_invalid_json(speech_server: str) -> None:
    response = httpx.post(f"{speech_server}/invocations", content=b"{oops", headers=JSON_TYPE, timeout=30)
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_json"


def test_openai_sdk_streams_speech(speech_server: str, tmp_path) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=f"{speech_server}/v1", api_key="not-needed")
    target = tmp_path / "speech.mp3"
    with client.audio.speech.with_streaming_response.create(
        model="kokoro", voice="nova", input="Hello there.", response_format="mp3"
    ) as response:
        chunks = list(response.iter_bytes(4096))
    target.write_bytes(b"".join(chunks))
    pcm = httpx.post(f"{speech_server}/v1/audio/speech", timeout=60,
                     json={"model": "kokoro", "voice": "nova", "input": "Hello there.", "response_format": "pcm"})
    assert _duration(target.read_bytes(), "mp3") == pytest.approx(len(pcm.content) / 2 / 24000, abs=0.15)


def test_openai_route_errors_are_openai_shaped(speech_server: str) -> None:
    from openai import BadRequestError, OpenAI

    client = OpenAI(base_url=f"{speech_server}/v1", api_key="not-needed")
    with pytest.raises(BadRequestError) as error:
        client.audio.speech.create(model="kokoro", voice="nova", input="Hi.", speed=3.5)
    assert error.value.body["code"] == "invalid_speed"  # type: ignore[index]


def test_metrics_are_prometheus_text(speech_server: str) -> None:
    httpx.post(f"{speech_server}/invocations", json={"text": "Count me."}, timeout=60)
    httpx.post(f"{speech_server}/invocations", json={"text": "hi", "voice": "nobody"}, timeout=60)
    text = httpx.get(f"{speech_server}/metrics").text
    for name in ("voicestream_time_to_first_audio_seconds_bucket", "voicestream_real_time_factor_count",
                 "voicestream_active_sessions", "voicestream_queue_depth"):
        assert name in text
    assert 'voicestream_errors_total{code="unknown_voice"}' in text


def test_openai_route_server_sent_events_use_openai_event_names(speech_server: str) -> None:
    decoder = SSEDecoder()
    events = []
    with httpx.stream("POST", f"{speech_server}/v1/audio/speech", timeout=60, json={
        "model": "kokoro", "input": "Hello there.", "voice": "af_heart", "response_format": "pcm", "stream_format": "sse",
    }) as response:
        for chunk in response.iter_raw():
            events += [event.json() for event in decoder.feed(chunk)]
    deltas = [e for e in events if e["type"] == "speech.audio.delta"]
    assert deltas and events[-1]["type"] == "speech.audio.done"
    pcm = b"".join(base64.b64decode(e["audio"]) for e in deltas)
    assert len(pcm) / 2 / 24000 == pytest.approx(HELLO_SECONDS, rel=0.03)
