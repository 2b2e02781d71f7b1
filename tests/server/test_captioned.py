"""``POST /dev/captioned_speech`` answers in Kokoro-FastAPI's shape, whole or line by line."""

from __future__ import annotations

import base64
import json

import httpx

TEXT = "Dr. Lee arrived early. The $5 tickets sold out."
KOKORO_ANSWER = {"audio", "audio_format", "timestamps"}
KOKORO_WORD = {"word", "start_time", "end_time"}


def test_whole_answer_has_kokoro_fastapi_shape(speech_server: str) -> None:
    body = {"model": "kokoro", "input": TEXT, "voice": "af_heart", "response_format": "wav", "stream": False}
    response = httpx.post(f"{speech_server}/dev/captioned_speech", json=body, timeout=120)
    assert response.status_code == 200
    answer = response.json()
    assert set(answer) == KOKORO_ANSWER
    assert answer["audio_format"] == "audio/wav"
    audio = base64.b64decode(answer["audio"])
    assert audio[:4] == b"RIFF"
    words = answer["timestamps"]
    assert all(set(word) == KOKORO_WORD for word in words)
    assert [word["word"] for word in words] == TEXT.split()
    audio_s = (len(audio) - 44) / 2 / 24_000
    assert 0 <= words[0]["start_time"] < words[-1]["end_time"] <= audio_s


def test_streamed_answer_is_one_object_per_line(speech_server: str) -> None:
    body = {"input": TEXT, "voice": "af_heart", "response_format": "mp3"}  # stream is Kokoro-FastAPI's default
    with httpx.stream("POST", f"{speech_server}/dev/captioned_speech", json=body, timeout=120) as response:
        assert response.status_code == 200
        lines = [json.loads(line) for line in response.iter_lines() if line]
    assert len(lines) >= 2
    assert all(set(line) == KOKORO_ANSWER and line["audio_format"] == "audio/mpeg" for line in lines)
    words = [word for line in lines for word in line["timestamps"]]
    assert [word["word"] for word in words] == TEXT.split()
    starts = [word["start_time"] for word in words]
    assert starts == sorted(starts)


def test_bad_request_gets_the_servers_error(speech_server: str) -> None:
    response = httpx.post(f"{speech_server}/dev/captioned_speech", json={"input": "hi", "speed": 9}, timeout=30)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_speed"


async def test_the_session_sends_word_times_before_each_pieces_audio(speech_server: str) -> None:
    """A request that asks gets a `word_timestamps` frame before each piece's audio: every
    word in order, timed from the request's start, within its audio; one that does not ask
    sees only the original sample's frames."""
    from tests.server.wire import WirePeer

    peer = await WirePeer.open(speech_server)
    text = "Dr. Lee paid $5 for it, then left. A second sentence follows."
    await peer.send({"text": text, "request_id": "w", "word_timestamps": True})
    frames = []
    while True:
        frame = await peer.ws.recv()
        frames.append(frame)
        if isinstance(frame, str) and '"synthesis_complete"' in frame:
            break
    kinds = ["audio" if isinstance(f, bytes) else json.loads(f)["type"] for f in frames]
    assert kinds[0] == "synthesis_start" and kinds[-1] == "synthesis_complete"
    assert kinds[1] == "word_timestamps" and kinds.count("word_timestamps") >= 2
    words = [w for f in frames if isinstance(f, str) and '"word_timestamps"' in f for w in json.loads(f)["words"]]
    assert [w["word"] for w in words] == text.split()
    starts = [w["start_s"] for w in words]
    assert starts == sorted(starts)
    duration = json.loads(frames[-1])["total_duration_s"]
    assert 0 <= starts[0] and words[-1]["end_s"] <= duration + 0.05
    await peer.send({"text": "No times asked.", "request_id": "plain"})
    assert (await peer.answer()).kinds == ["synthesis_start", "synthesis_complete"]
    await peer.close()


WHOLE_TEXT = ("A whole captioned answer that nobody waits for. " * 420)[:20_000]
"""The longest text accepted: about twenty minutes of speech, never spoken to the end here."""


async def test_a_whole_answer_counts_against_max_whole_files_and_ends_when_the_client_leaves(make_speech_server) -> None:
    """``stream: false`` holds its whole answer in memory, as ``POST /invocations``' does:
    with ``--max-whole-files 1`` one being prepared makes another captioned one (and an
    ``/invocations`` one: the cap is shared) ``busy`` at once, while a streamed answer is
    still served; when its client hangs up its request is cancelled (the server's own
    count), long before twenty minutes of speech could render, and the slot is free again.
    (Before, captioned whole answers were not counted, and one whose client left rendered
    to the end.)"""
    import asyncio
    import contextlib

    from tests.server.wire import metric, until_above, until_zero

    url = make_speech_server(max_whole_files=1)
    captioned = f"{url}/dev/captioned_speech"
    async with httpx.AsyncClient(timeout=120) as holder, httpx.AsyncClient(timeout=120) as client:
        holding = asyncio.create_task(holder.post(captioned, json={"input": WHOLE_TEXT, "stream": False}))
        await until_above(url, 'voicestream_requests_total{route="captioned"}', 0)  # counted before it queued
        refused = await client.post(captioned, json={"input": "One more whole answer.", "stream": False})
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "busy"
        other = await client.post(f"{url}/invocations", json={"text": "A whole file.", "stream": False})
        assert other.status_code == 503 and other.json()["error"]["code"] == "busy"
        streamed = await client.post(captioned, json={"input": "A stream is not a whole answer.", "stream": True})
        assert streamed.status_code == 200 and streamed.content
        holding.cancel()
        await holder.aclose()  # the holder hangs up
        await until_zero(url, "voicestream_queue_depth")
        assert await metric(url, 'voicestream_requests_ended_total{state="cancelled"}') == 1
        async with asyncio.timeout(30):  # its slot is given back as the cancelled answer returns
            while (again := await client.post(captioned, json={"input": "Hi.", "stream": False})).status_code == 503:
                await asyncio.sleep(0.1)
        assert again.status_code == 200 and base64.b64decode(again.json()["audio"])
    with contextlib.suppress(asyncio.CancelledError):
        await holding
