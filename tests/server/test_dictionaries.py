"""The vendors' pronunciation dictionaries on a real server: ElevenLabs' add-from-file (PLS,
multipart) and add-from-rules, list and get, and its locators on the REST and WebSocket
routes, by hand and through the official ``elevenlabs`` SDK; Cartesia's dictionaries through
its official SDK; Kokoro-FastAPI's /dev/phonemize and
/dev/generate_from_phonemes. A dictionary's words reach the model as its phonemes, and the
dictionaries outlive a restart, within their bounds."""

from __future__ import annotations

import base64
import io
import json
import wave
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from cartesia import Cartesia
from websockets.asyncio.client import connect

from voicestream.engine.phonemes import Phonemizer
from voicestream.speech.dictionaries import DictionaryError, PronunciationDictionaries
from voicestream.text.lexicon import Entry

pytestmark = pytest.mark.timeout(300)

PLS = """<?xml version="1.0" encoding="UTF-8"?>
<lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon" alphabet="ipa" xml:lang="en-US">
  <lexeme><grapheme>Xarelto</grapheme><phoneme>zəɹˈɛltoʊ</phoneme></lexeme>
</lexicon>"""
FLOMPER = "ˈæpəl"


@pytest.fixture
def server(make_speech_server: Callable[..., str], tmp_path: Path) -> str:
    return make_speech_server(dictionaries_dir=tmp_path / "dictionaries")


def _phonemize(base: str, text: str, language: str = "a") -> dict:
    answer = httpx.post(f"{base}/dev/phonemize", json={"text": text, "language": language}, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_phonemize_answers_what_the_model_receives(server: str) -> None:
    plain = _phonemize(server, "Hello there.")
    assert plain["phonemes"] == Phonemizer().phonemize("Hello there.")
    assert plain["tokens"][0] == plain["tokens"][-1] == 0 and len(plain["tokens"]) == len(plain["phonemes"]) + 2
    marked = _phonemize(server, f"Say [Flomper](/{FLOMPER}/) twice.")
    assert FLOMPER in marked["phonemes"]
    refused = httpx.post(f"{server}/dev/phonemize", json={"text": "<speak>x<b></speak>"}, timeout=60)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_markup"


def test_generate_from_phonemes_is_a_wav(server: str) -> None:
    answer = httpx.post(f"{server}/dev/generate_from_phonemes", timeout=60,
                        json={"phonemes": "həlˈoʊ ðˈɛɹ.", "voice": "af_heart", "speed": 1.0})
    assert answer.status_code == 200, answer.text
    assert answer.content[:4] == b"RIFF"
    with wave.open(io.BytesIO(answer.content)) as wav:
        assert wav.getframerate() == 24000
    bad = httpx.post(f"{server}/dev/generate_from_phonemes", json={"phonemes": "q§"}, timeout=60)
    assert bad.status_code == 400 and "'§'" in bad.text


def test_elevenlabs_dictionaries_from_a_file_and_from_rules(server: str) -> None:
    added = httpx.post(f"{server}/v1/pronunciation-dictionaries/add-from-file", timeout=60,
                       data={"name": "drugs", "description": "names"},
                       files={"file": ("drugs.pls", PLS.encode(), "application/pls+xml")})
    assert added.status_code == 200, added.text
    from_file = added.json()
    assert from_file["name"] == "drugs" and from_file["version_rules_num"] == 1 and from_file["version_id"]
    rules = httpx.post(f"{server}/v1/pronunciation-dictionaries/add-from-rules", timeout=60, json={
        "name": "fruit", "rules": [
            {"type": "phoneme", "string_to_replace": "Flomper", "phoneme": FLOMPER, "alphabet": "ipa"},
            {"type": "alias", "string_to_replace": "WHO", "alias": "World Health Organization"},
        ]})
    assert rules.status_code == 200, rules.text
    listed = httpx.get(f"{server}/v1/pronunciation-dictionaries/", timeout=60).json()["pronunciation_dictionaries"]
    assert [d["name"] for d in listed] == ["drugs", "fruit"]
    got = httpx.get(f"{server}/v1/pronunciation-dictionaries/{rules.json()['id']}/", timeout=60).json()
    assert got["latest_version_rules_num"] == 2 and got["latest_version_id"] == rules.json()["version_id"]
    assert httpx.get(f"{server}/v1/pronunciation-dictionaries/nope/", timeout=60).status_code == 404
    bad = httpx.post(f"{server}/v1/pronunciation-dictionaries/add-from-rules", timeout=60, json={
        "name": "x", "rules": [{"type": "phoneme", "string_to_replace": "a", "phoneme": "a", "alphabet": "cmu-arpabet"}]})
    assert bad.status_code == 400 and "cmu-arpabet" in bad.text


def _locators(*ids: str) -> list[dict[str, str]]:
    return [{"pronunciation_dictionary_id": i, "version_id": "v"} for i in ids]


async def test_locators_apply_on_the_rest_and_websocket_routes(server: str) -> None:
    async with httpx.AsyncClient(timeout=120) as client:
        made = await client.post(f"{server}/v1/pronunciation-dictionaries/add-from-rules", json={
            "name": "fruit", "rules": [{"type": "phoneme", "string_to_replace": "Flomper", "phoneme": FLOMPER}]})
        dictionary = made.json()["id"]
        body = {"text": "A Flomper a day.", "pronunciation_dictionary_locators": _locators(dictionary)}
        timed = await client.post(f"{server}/v1/text-to-speech/af_heart/with-timestamps", json=body,
                                  params={"output_format": "pcm_24000"})
        plain = await client.post(f"{server}/v1/text-to-speech/af_heart/with-timestamps",
                                  json={"text": "A Flomper a day."}, params={"output_format": "pcm_24000"})
        missing = await client.post(f"{server}/v1/text-to-speech/af_heart",
                                    json={**body, "pronunciation_dictionary_locators": _locators("nope")})
    assert timed.status_code == plain.status_code == 200
    assert timed.json()["audio_base64"] != plain.json()["audio_base64"]
    assert "".join(timed.json()["alignment"]["characters"]).strip() == "A Flomper a day."
    assert missing.status_code == 400 and "nope" in missing.text
    url = server.replace("http://", "ws://") + "/v1/text-to-speech/af_heart/stream-input?output_format=pcm_24000"
    audio = bytearray()
    async with connect(url, max_size=None) as ws:
        await ws.send(json.dumps({"text": " ", "pronunciation_dictionary_locators": _locators(dictionary)}))
        await ws.send(json.dumps({"text": "A Flomper a day. "}))
        await ws.send(json.dumps({"text": ""}))
        while not (answer := json.loads(await ws.recv())).get("isFinal"):
            assert "error" not in answer, answer
            audio += base64.b64decode(answer.get("audio") or "")
    assert bytes(audio) == base64.b64decode(timed.json()["audio_base64"])


def test_elevenlabs_dictionaries_through_the_official_sdk(server: str) -> None:
    """The ``elevenlabs`` SDK's own client, pointed at the server: a dictionary from a PLS file
    and one from rules (the SDK's rule models), listed and got with their rules; speech with
    their locators is the speech of the same text with the lexicon's phonemes written inline
    (the model received them), and differs from the speech without."""
    from elevenlabs import ElevenLabs, PronunciationDictionaryVersionLocator
    from elevenlabs.pronunciation_dictionaries import (
        BodyAddAPronunciationDictionaryV1PronunciationDictionariesAddFromRulesPostRulesItem_Alias as Alias,
    )
    from elevenlabs.pronunciation_dictionaries import (
        BodyAddAPronunciationDictionaryV1PronunciationDictionariesAddFromRulesPostRulesItem_Phoneme as Phoneme,
    )

    client = ElevenLabs(api_key="unused", base_url=server, timeout=120)
    dictionaries = client.pronunciation_dictionaries
    from_file = dictionaries.create_from_file(name="drugs", file=("drugs.pls", PLS.encode(), "application/pls+xml"),
                                              description="names")
    assert (from_file.name, from_file.version_rules_num, from_file.description) == ("drugs", 1, "names")
    from_rules = dictionaries.create_from_rules(name="fruit", rules=[
        Phoneme(string_to_replace="Flomper", phoneme=FLOMPER, alphabet="ipa"),
        Alias(string_to_replace="WHO", alias="World Health Organization", case_sensitive=None),
    ])
    assert from_rules.version_rules_num == 2
    listed = dictionaries.list(page_size=10)
    assert [d.name for d in listed.pronunciation_dictionaries] == ["drugs", "fruit"] and not listed.has_more
    got = dictionaries.get(from_rules.id)
    assert (got.latest_version_id, got.latest_version_rules_num) == (from_rules.version_id, 2)
    assert [(r.type, r.string_to_replace) for r in got.rules] == [("phoneme", "Flomper"), ("alias", "WHO")]
    assert got.rules[0].phoneme == FLOMPER and got.rules[0].alphabet == "ipa" and got.rules[1].case_sensitive
    assert dictionaries.get(from_file.id).rules[0].phoneme == "zəɹˈɛltoʊ"

    def spoken(text: str, *added: object) -> bytes:
        locators = [PronunciationDictionaryVersionLocator(pronunciation_dictionary_id=a.id, version_id=a.version_id)
                    for a in added]
        return b"".join(client.text_to_speech.convert("af_heart", text=text, output_format="pcm_24000",
                                                      **({"pronunciation_dictionary_locators": locators} if added else {})))

    with_locators = spoken("Take Xarelto with a Flomper.", from_file, from_rules)
    assert with_locators == spoken(f"Take [Xarelto](/zəɹˈɛltoʊ/) with a [Flomper](/{FLOMPER}/).")
    assert with_locators != spoken("Take Xarelto with a Flomper.")


def test_cartesia_dictionaries_through_the_sdk(server: str) -> None:
    with Cartesia(api_key="unused", base_url=server) as cartesia:
        made = cartesia.pronunciation_dicts.create(name="fruit", items=[{"text": "Flomper", "alias": f"/{FLOMPER}/"}])
        cartesia.pronunciation_dicts.create(name="other", items=[{"text": "WHO", "alias": "World Health Organization"}])
        assert [d.name for d in cartesia.pronunciation_dicts.list(limit=1)] == ["fruit", "other"]  # paged
        assert cartesia.pronunciation_dicts.retrieve(made.id).items[0].alias == f"/{FLOMPER}/"
        raw = {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}
        with_dictionary = cartesia.tts.generate(model_id="sonic-3", transcript="A Flomper a day.", voice={"id": "af_heart"},
                                                output_format=raw, pronunciation_dict_id=made.id).read()
        without = cartesia.tts.generate(model_id="sonic-3", transcript="A Flomper a day.", voice={"id": "af_heart"},
                                        output_format=raw).read()
        assert with_dictionary != without
        cartesia.pronunciation_dicts.delete(made.id)
        assert [d.name for d in cartesia.pronunciation_dicts.list()] == ["other"]


def test_dictionaries_persist_and_are_bounded(tmp_path: Path) -> None:
    store = PronunciationDictionaries(tmp_path, max_count=2, max_bytes=1000)
    made = store.add_pls("drugs", PLS.encode())
    again = PronunciationDictionaries(tmp_path, max_count=2, max_bytes=1000)
    assert again.get(made.id).entries == made.entries
    assert again.lexicon([made.id]) is not None
    with pytest.raises(DictionaryError, match="at most 1000 bytes"):
        store.add_entries("big", [Entry("a", "a")], 1001)
    store.add_entries("second", [Entry("b", None, "bee")], 10)
    with pytest.raises(DictionaryError, match="at most 2"):
        store.add_entries("third", [Entry("c", None, "see")], 10)
    with pytest.raises(DictionaryError, match="No pronunciation dictionary"):
        store.get("missing")


def test_serve_lexicon_reaches_the_model_on_every_route(engine, tmp_path: Path) -> None:
    """`voicestream serve --lexicon` (PLS and word<TAB>IPA): /dev/phonemize shows the lexicon's
    phonemes for its words, in English and in Spanish, and the OpenAI route's audio changes."""
    from tests.server.wire import serve_process

    pls, tsv = tmp_path / "drugs.pls", tmp_path / "names.tsv"
    pls.write_text(PLS, encoding="utf-8")
    tsv.write_text("# language: es\nKokoro\tkokˈoɾo\n", encoding="utf-8")
    with serve_process(engine.files.model_path.parent, "--lexicon", str(pls), "--lexicon", str(tsv)) as (_, url):
        english = _phonemize(url, "Take Xarelto, XARELTO daily.")
        spanish = _phonemize(url, "Hola Kokoro.", "e")
        untouched = _phonemize(url, "Kokoro.")  # the Spanish entry is Spanish only
    assert english["phonemes"].count("zəɹˈɛltoʊ") == 2
    assert "kokˈoɾo" in spanish["phonemes"]
    assert "kokˈoɾo" not in untouched["phonemes"]
    assert untouched["phonemes"] == Phonemizer().phonemize("Kokoro.")


def test_an_upload_must_come_from_a_non_browser(server: str) -> None:
    refused = httpx.post(f"{server}/v1/pronunciation-dictionaries/add-from-file", timeout=60,
                         headers={"Origin": "https://evil.test"}, data={"name": "x"},
                         files={"file": ("x.pls", PLS.encode(), "application/pls+xml")})
    assert refused.status_code == 415
    elsewhere = httpx.post(f"{server}/v1/pronunciation-dictionaries/add-from-rules", timeout=60,
                           data={"name": "x"}, files={"file": ("x.pls", PLS.encode(), "application/pls+xml")})
    assert elsewhere.status_code == 415
