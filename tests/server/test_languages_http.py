"""Languages and blends over the wire: `lang` on every route, blends, and their errors."""

from __future__ import annotations

import httpx
import pytest
from tests.server.wire import WirePeer

from voicestream.audio import float_to_pcm16
from voicestream.engine.offline import synthesize

TEXT = "Buenos días, amigo."


def _engine_pcm(engine, text: str, voice: str, language: str | None = None) -> bytes:
    """What the engine itself makes of the request, as the server's pcm16 bytes."""
    return float_to_pcm16(synthesize(engine, text, voice, language=language)).astype("<i2").tobytes()


def _pcm(speech_server: str, **body: object) -> httpx.Response:
    return httpx.post(f"{speech_server}/invocations", json={"text": TEXT, "format": "pcm16", **body}, timeout=60)


def test_lang_on_invocations_reads_the_text_in_that_language(speech_server: str, engine) -> None:
    as_spanish = _pcm(speech_server, voice="af_heart", lang="es")
    as_english = _pcm(speech_server, voice="af_heart")
    assert as_spanish.status_code == as_english.status_code == 200
    assert as_spanish.content == _engine_pcm(engine, TEXT, "af_heart", "es")
    assert as_spanish.content != as_english.content


def test_a_voice_speaks_its_own_language_without_lang(speech_server: str, engine) -> None:
    assert _pcm(speech_server, voice="ef_dora").content == _pcm(speech_server, voice="ef_dora", lang="es").content


def test_lang_on_the_openai_route(speech_server: str, engine) -> None:
    body = {"input": TEXT, "voice": "af_heart", "response_format": "pcm", "lang": "es"}
    response = httpx.post(f"{speech_server}/v1/audio/speech", json=body, timeout=60)
    assert response.status_code == 200
    assert response.content == _engine_pcm(engine, TEXT, "af_heart", "es")


@pytest.mark.parametrize("route", ["/invocations", "/v1/audio/speech"])
def test_an_unknown_language_is_refused_with_its_code(speech_server: str, route: str) -> None:
    body = {"text": TEXT, "input": TEXT, "lang": "tlh"}
    response = httpx.post(f"{speech_server}{route}", json=body, timeout=30)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "unsupported_language" and "pt-br" in error["message"]


async def test_lang_on_the_session_and_an_unknown_one_keeps_it_open(speech_server: str, engine) -> None:
    peer = await WirePeer.open(speech_server)
    await peer.send({"text": TEXT, "request_id": "bad", "lang": "xx"})
    await peer.send({"text": TEXT, "request_id": "good", "voice": "af_heart", "lang": "es"})
    bad, good = await peer.answer(), await peer.answer()
    assert bad.last == {"type": "error", "request_id": "bad", "code": "unsupported_language",
                        "message": bad.last["message"]}
    assert good.kinds == ["synthesis_start", "synthesis_complete"]
    assert bytes(good.audio) == _engine_pcm(engine, TEXT, "af_heart", "es")
    await peer.close()


def test_a_weighted_blend_mixes_the_voice_packs(speech_server: str, engine) -> None:
    text = "Hello there."
    blend = httpx.post(f"{speech_server}/invocations",
                       json={"text": text, "voice": "af_bella(2)+af_sky(1)", "format": "pcm16"}, timeout=60)
    assert blend.status_code == 200
    bella, sky = (_engine_pcm(engine, text, voice) for voice in ("af_bella", "af_sky"))
    assert blend.content not in (bella, sky)
    assert abs(len(blend.content) - len(bella)) < 0.2 * len(bella)
    same_ratio = httpx.post(f"{speech_server}/invocations",
                            json={"text": text, "voice": "af_bella(0.5)+af_sky(0.25)", "format": "pcm16"}, timeout=60)
    assert same_ratio.content == blend.content


@pytest.mark.parametrize(("voice", "code"), [
    ("af_bella+ef_dora", "invalid_voice_blend"),
    ("af_bella(0)+af_sky", "invalid_voice_blend"),
    ("af_bella+af_nobody", "unknown_voice"),
])
def test_bad_blends_are_refused_with_their_code(speech_server: str, voice: str, code: str) -> None:
    response = httpx.post(f"{speech_server}/invocations", json={"text": "Hi.", "voice": voice}, timeout=30)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
