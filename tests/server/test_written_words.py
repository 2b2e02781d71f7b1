"""Word times in the writer's own spelling on every face that gives them: the session (a
whole request; the streamed utterance is in test_session.py), Kokoro-FastAPI's captioned
route and Cartesia's SSE route. "$5," stays "$5,", "Dr." stays "Dr.", "**bold**" is "bold";
where the face's format has room for them (the session), with their offsets in the text sent."""

from __future__ import annotations

import json

import httpx
from tests.server.wire import WirePeer

TEXT = "It costs $5, said Dr. Lee. This is **bold** text."
WORDS = ["It", "costs", "$5,", "said", "Dr.", "Lee.", "This", "is", "bold", "text."]


async def test_the_session_times_the_words_as_written_at_their_offsets(speech_server: str) -> None:
    peer = await WirePeer.open(speech_server)
    await peer.send({"text": TEXT, "request_id": "w", "word_timestamps": True})
    answer = await peer.answer()
    await peer.close()
    words = [w for f in answer.frames if f["type"] == "word_timestamps" for w in f["words"]]
    assert [w["word"] for w in words] == WORDS
    assert [TEXT[w["start_char"] : w["end_char"]].replace("**", "") for w in words] == WORDS


def test_the_captioned_route_times_the_words_as_written(speech_server: str) -> None:
    body = {"input": TEXT, "stream": False, "response_format": "wav"}
    answer = httpx.post(f"{speech_server}/dev/captioned_speech", json=body, timeout=120).json()
    assert [w["word"] for w in answer["timestamps"]] == WORDS


def test_cartesias_sse_route_times_the_words_as_written(speech_server: str) -> None:
    body = {
        "model_id": "sonic-2", "transcript": TEXT, "voice": {"mode": "id", "id": "af_heart"},
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
        "add_timestamps": True,
    }
    headers = {"Cartesia-Version": "2025-04-16"}
    response = httpx.post(f"{speech_server}/tts/sse", json=body, headers=headers, timeout=120)
    events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    words = [w for e in events if e["type"] == "timestamps" for w in e["word_timestamps"]["words"]]
    assert words == WORDS
