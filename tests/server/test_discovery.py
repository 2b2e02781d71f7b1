"""Voice discovery over HTTP: GET /voices, /v1/audio/voices, /v1/models, and the OpenAI SDK."""

from __future__ import annotations

import httpx


def test_voices_lists_every_voice_with_language_and_gender(speech_server: str, engine) -> None:
    voices = httpx.get(f"{speech_server}/voices").json()["voices"]
    assert sorted(v["name"] for v in voices) == sorted(engine.voices)
    by_name = {v["name"]: v for v in voices}
    assert by_name["af_heart"] == {"name": "af_heart", "language": "en-us", "gender": "female"}
    assert by_name["zm_yunxi"] == {"name": "zm_yunxi", "language": "zh", "gender": "male"}
    assert {v["language"] for v in voices} == {"en-us", "en-gb", "es", "fr-fr", "hi", "it", "ja", "pt-br", "zh"}


def test_openai_voices_route_has_names_and_objects(speech_server: str, engine) -> None:
    body = httpx.get(f"{speech_server}/v1/audio/voices").json()
    assert sorted(body["voices"]) == sorted(engine.voices)
    assert {"id": "ef_dora", "object": "voice", "name": "ef_dora", "language": "es", "gender": "female"} in body["data"]


def test_the_openai_sdk_lists_models_and_voices(speech_server: str, engine) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=f"{speech_server}/v1", api_key="unused", max_retries=0, timeout=30)
    assert {"kokoro", "tts-1"} <= {model.id for model in client.models.list()}
    voices = client.get("/audio/voices", cast_to=object)
    assert sorted(voices["voices"]) == sorted(engine.voices)
