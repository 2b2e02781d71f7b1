"""The bidirectional session against the real server and the real model on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import time

import httpx
import pytest
from tests.server.wire import WirePeer, metric, open_non_reader, until_above, until_zero
from websockets.exceptions import ConnectionClosed

THREE_SENTENCES = [  # the reference's 1.525, 2.250 and 2.050 s, less Kokoro's padding (engine/silence.py)
    ("Hello there.", 1.006),
    ("This is a post deployment check.", 1.892),
    ("It has three sentences.", 1.653),
]


@pytest.mark.parametrize("binary", [False, True], ids=["text-frames", "binary-frames"])
async def test_three_sentences_on_one_session(speech_server: str, binary: bool) -> None:
    """The reference's post-deployment check, with SageMaker's binary frames and with text frames."""
    peer = await WirePeer.open(speech_server, binary=binary)
    for index, (text, _) in enumerate(THREE_SENTENCES):
        await peer.send({"text": text, "request_id": f"r{index}", "voice": "af_heart"})
    for index, (_, seconds) in enumerate(THREE_SENTENCES):
        answer = await peer.answer()
        assert answer.kinds == ["synthesis_start", "synthesis_complete"]
        start, complete = answer.frames
        assert start == {"type": "synthesis_start", "request_id": f"r{index}", "format": "pcm16",
                         "sample_rate": 24000, "channels": 1}
        assert complete["request_id"] == f"r{index}"
        assert complete["audio_bytes"] == len(answer.audio)
        assert len(answer.audio) / 2 / 24000 == pytest.approx(seconds, rel=0.05)
        assert complete["total_duration_s"] == pytest.approx(seconds, rel=0.05)
    # The session is still open after every synthesis_complete: one more request works.
    await peer.send({"text": "Still here.", "request_id": "again"})
    answer = await peer.answer()
    assert answer.kinds[-1] == "synthesis_complete" and len(answer.audio) > 0
    await peer.close()


async def test_sample_client_without_type_or_request_id(speech_server: str) -> None:
    peer = await WirePeer.open(speech_server)
    await peer.send({"text": "Hello there."})
    answer = await peer.answer()
    assert answer.kinds == ["synthesis_start", "synthesis_complete"]
    assert answer.frames[0]["request_id"] == answer.frames[1]["request_id"] != ""
    await peer.close()


async def test_requests_never_interleave_and_keep_order(speech_server: str) -> None:
    peer = await WirePeer.open(speech_server)
    texts = ["A fairly long first sentence, with a clause or two, to keep the model busy.", "Short.", "Also short."]
    for index, text in enumerate(texts):
        await peer.send({"text": text, "request_id": f"o{index}"})
    for index in range(len(texts)):
        answer = await peer.answer()
        assert {f["request_id"] for f in answer.frames} == {f"o{index}"}
        assert answer.kinds == ["synthesis_start", "synthesis_complete"]
    await peer.close()


async def test_formats_over_the_session(speech_server: str) -> None:
    from voicestream.audio import decode_audio

    peer = await WirePeer.open(speech_server)
    await peer.send({"text": "Hello there.", "request_id": "m", "format": "mp3", "sample_rate": 16000})
    answer = await peer.answer()
    assert answer.frames[0]["format"] == "mp3" and answer.frames[0]["sample_rate"] == 16000
    samples, rate = decode_audio(bytes(answer.audio), "mp3")
    assert rate == 16000
    assert len(samples) / rate == pytest.approx(THREE_SENTENCES[0][1], abs=0.2)
    await peer.close()


BAD_MESSAGES = [
    ("invalid_json", b"{not json"),
    ("invalid_json", b"\xff\xfe\x00"),
    ("invalid_message", json.dumps([1, 2, 3])),
    ("invalid_message", json.dumps({"type": "dance", "text": "hi"})),
    ("text_required", json.dumps({"type": "synthesize", "request_id": "t"})),
    ("text_required", json.dumps({"text": "   ", "request_id": "t"})),
    ("text_too_long", json.dumps({"text": "word " * 5000, "request_id": "t"})),
    ("unknown_voice", json.dumps({"text": "hi", "voice": "zz_nobody", "request_id": "t"})),
    ("unsupported_format", json.dumps({"text": "hi", "format": "wma", "request_id": "t"})),
    ("unsupported_sample_rate", json.dumps({"text": "hi", "sample_rate": 11025, "request_id": "t"})),
    ("invalid_speed", json.dumps({"text": "hi", "speed": 9, "request_id": "t"})),
]


async def test_a_request_is_stale_by_the_servers_clock_not_the_clients(make_speech_server) -> None:
    """A client clock an hour off changes nothing; a request that waits past
    ``stale_after_s`` here (zero: any wait) is answered ``request_stale`` and the session goes on."""
    peer = await WirePeer.open(make_speech_server())
    await peer.send({"text": "My clock is an hour slow.", "request_timestamp": time.time() - 3600, "request_id": "c"})
    assert (await peer.answer()).kinds == ["synthesis_start", "synthesis_complete"]
    await peer.close()
    peer = await WirePeer.open(make_speech_server(stale_after_s=0.0))
    for rid in ("s1", "s2"):
        await peer.send({"text": "Hi.", "request_id": rid})
        answer = await peer.answer()
        assert answer.last["type"] == "error" and answer.last["code"] == "request_stale"
        assert answer.audio_frames == 0
    await peer.close()


@pytest.mark.parametrize(("code", "payload"), BAD_MESSAGES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(BAD_MESSAGES)])
async def test_bad_message_gets_its_code_and_session_goes_on(speech_server: str, code: str, payload: str | bytes) -> None:
    peer = await WirePeer.open(speech_server)
    await peer.send(payload)
    answer = await peer.answer()
    assert answer.kinds == ["error"]
    error = answer.last
    assert error["code"] == code
    assert "'text'" not in error["message"] and "Traceback" not in error["message"]
    assert len(error["message"]) > 10
    await peer.send({"text": "Fine.", "request_id": "after"})
    after = await peer.answer()
    assert after.kinds == ["synthesis_start", "synthesis_complete"]
    await peer.close()


LONG_ANSWER = " ".join(f"This is sentence number {n} of a long answer." for n in range(1, 31))
"""About 80 s of speech: 7 MB of pcm16 at 48 kHz, more than the buffers between a server and
a client that reads nothing hold (a kernel's send buffer grows to 4 MB by default)."""


async def test_cancel_stops_the_request_being_spoken_and_the_one_queued(make_speech_server) -> None:
    """A barge-in: a cancel after the first audio ends the request being spoken with
    ``synthesis_cancelled`` after part of its audio and the one queued behind it with that
    frame alone; by the server's own counts both ended cancelled and the engine stopped,
    having rendered a fraction of the text; the session goes on. The client reads nothing
    but the first frame before it cancels (and the server may render little ahead of what
    it sent), so the answer cannot be complete by then however fast this machine renders.
    How much audio was already on its way when the cancel arrived is up to the buffers
    between the two, so it is not counted."""
    url = make_speech_server(listener_budget_bytes=100_000)
    peer = WirePeer(await open_non_reader(url))
    await peer.send({"text": LONG_ANSWER, "request_id": "long", "sample_rate": 48000})
    await peer.send({"text": "Queued behind it.", "request_id": "queued"})
    while not isinstance(await peer.ws.recv(), bytes):
        pass
    await peer.send({"type": "cancel"})
    answer = await peer.answer()
    assert answer.kinds == ["synthesis_cancelled"] and answer.request_id == "long"
    queued = await peer.answer()
    assert queued.frames == [{"type": "synthesis_cancelled", "request_id": "queued"}] and queued.audio_frames == 0
    await until_zero(url, "voicestream_queue_depth", "voicestream_rendering_pieces")  # a piece being rendered at the cancel is finished, then dropped
    assert await metric(url, 'voicestream_requests_ended_total{state="cancelled"}') == 2
    assert await metric(url, "voicestream_rendered_audio_seconds") < 40
    await peer.send({"text": "After the barge-in.", "request_id": "next"})
    assert (await peer.answer()).kinds == ["synthesis_start", "synthesis_complete"]
    assert await metric(url, 'voicestream_requests_ended_total{state="done"}') == 1
    await peer.close()


async def test_cancel_one_request_by_id(speech_server: str) -> None:
    peer = await WirePeer.open(speech_server)
    await peer.send({"text": "First one is kept.", "request_id": "keep"})
    await peer.send({"text": "Second one is dropped.", "request_id": "drop"})
    await peer.send({"type": "cancel", "request_id": "drop"})
    first, second = await peer.answer(), await peer.answer()
    assert first.kinds == ["synthesis_start", "synthesis_complete"]
    assert second.last == {"type": "synthesis_cancelled", "request_id": "drop"}
    await peer.close()


async def test_close_finishes_accepted_work_first(speech_server: str) -> None:
    peer = await WirePeer.open(speech_server)
    await peer.send({"text": "One.", "request_id": "c1"})
    await peer.send({"text": "Two, after one.", "request_id": "c2"})
    await peer.send({"type": "close"})
    answers = [await peer.answer(), await peer.answer()]
    assert [a.last["type"] for a in answers] == ["synthesis_complete", "synthesis_complete"]
    with pytest.raises(ConnectionClosed) as closed:
        await asyncio.wait_for(peer.ws.recv(), 10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000


async def test_idle_session_is_closed(make_speech_server) -> None:
    url = make_speech_server(idle_timeout_s=0.5)
    peer = await WirePeer.open(url)
    with pytest.raises(ConnectionClosed):
        await asyncio.wait_for(peer.ws.recv(), 10)


async def test_too_many_sessions_get_busy(make_speech_server) -> None:
    url = make_speech_server(max_sessions=1)
    first = await WirePeer.open(url)
    await first.send({"text": "Hi.", "request_id": "a"})
    await first.answer()
    second = await WirePeer.open(url)
    answer = await second.answer()
    assert answer.last["code"] == "busy"
    await first.send({"text": "First session still works.", "request_id": "b"})
    assert (await first.answer()).kinds[-1] == "synthesis_complete"
    await first.close()


async def test_full_queue_answers_busy_at_once(make_speech_server) -> None:
    url = make_speech_server(max_queue=2)
    peer = await WirePeer.open(url)
    for index in range(4):
        await peer.send({"text": f"Request number {index} of four.", "request_id": f"q{index}"})
    answers = [await peer.answer() for _ in range(4)]
    codes = [a.last.get("code") for a in answers if a.last["type"] == "error"]
    assert codes and set(codes) == {"busy"}
    assert sum(a.last["type"] == "synthesis_complete" for a in answers) >= 2
    await peer.close()


async def test_disconnect_mid_synthesis_frees_the_work(speech_server: str) -> None:
    import httpx

    peer = await WirePeer.open(speech_server)
    long_text = " ".join(f"Sentence {n} is here to keep the engine busy for a while." for n in range(20))
    await peer.send({"text": long_text, "request_id": "gone"})
    while not isinstance(await peer.ws.recv(), bytes):
        pass
    await peer.ws.close()

    async def settled() -> dict[str, float]:
        async with httpx.AsyncClient() as client:
            text = (await client.get(f"{speech_server}/metrics")).text
        values = {}
        for name in ("voicestream_queue_depth", "voicestream_active_sessions"):
            line = next(line for line in text.splitlines() if line.startswith(name + " "))
            values[name] = float(line.split()[1])
        return values

    async with asyncio.timeout(30):
        while (await settled()) != {"voicestream_queue_depth": 0.0, "voicestream_active_sessions": 0.0}:
            await asyncio.sleep(0.2)


async def test_websocket_is_accepted_and_answers_pings_beside_a_stalled_session(make_speech_server) -> None:
    """SageMaker wants the upgrade within 250 ms and keeps idle sessions alive with pings:
    neither waits for other sessions' work. Another session's long request is held unsent
    (its client reads nothing) while a new socket opens and is pinged; by the server's own
    count that request is still there afterwards, so nothing waited for it."""
    url = make_speech_server(listener_budget_bytes=100_000)
    stalled = await open_non_reader(url)
    await stalled.send(json.dumps({"text": LONG_ANSWER, "request_id": "held", "sample_rate": 48000}))
    await until_above(url, "voicestream_rendered_audio_seconds", 0)
    peer = await asyncio.wait_for(WirePeer.open(url), 30)
    await asyncio.wait_for(await peer.ws.ping(), 30)
    assert await metric(url, "voicestream_queue_depth") == 1
    assert await metric(url, "voicestream_active_sessions") == 2
    await peer.close()
    stalled.transport.abort()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


async def test_websocket_is_accepted_while_the_model_loads(engine, tmp_path) -> None:
    """The socket opens before the model is ready, and a request sent then waits for it.
    The load is held at a gate that the test opens: one voice pack is a named pipe, which
    the server's weights check reads to its end before the model loads, so /ping says
    ``loading`` for as long as the test wants, however fast this machine loads."""
    from voicestream.server import ServerSettings, free_port, running_server

    voices = tmp_path / "voices"
    voices.mkdir()
    (tmp_path / "model.onnx").symlink_to(engine.files.model_path)
    (voices / "af_heart.bin").symlink_to(engine.files.voices_dir / "af_heart.bin")
    gate = voices / "af_bella.bin"  # a published name: its sha256 is checked
    os.mkfifo(gate)
    held = os.open(gate, os.O_RDWR)  # a writer from the start: the server's read waits for data, not for a writer
    settings = ServerSettings(host="127.0.0.1", port=free_port(), model_dir=tmp_path)
    try:
        with running_server(None, settings) as url:
            peer = await asyncio.wait_for(WirePeer.open(url), 30)
            await peer.send({"text": "Hello there.", "request_id": "early"})
            async with httpx.AsyncClient() as client:
                ping = await client.get(f"{url}/ping")
            assert ping.status_code == 503 and ping.json()["status"] == "loading"
            pack = (engine.files.voices_dir / "af_bella.bin").read_bytes()
            await asyncio.to_thread(_write_all, held, pack)  # returns once the server has read most of it
            os.close(held)  # the end of the pack: the load goes on
            held = None
            answer = await peer.answer()
            assert answer.kinds == ["synthesis_start", "synthesis_complete"]
            await peer.close()
    finally:
        gate.unlink()  # a load not yet at the gate reads nothing from it
        if held is not None:
            os.close(held)


async def test_engine_failure_is_internal_and_session_goes_on(engine, tmp_path) -> None:
    """A request whose synthesis fails (a damaged voice pack) gets `internal`; others still speak."""
    from voicestream.server import ServerSettings, free_port, running_server

    (tmp_path / "voices").mkdir()
    (tmp_path / "model.onnx").symlink_to(engine.files.model_path)
    (tmp_path / "voices" / "af_heart.bin").symlink_to(engine.files.voices_dir / "af_heart.bin")
    (tmp_path / "voices" / "zz_damaged.bin").write_bytes(b"\x00" * 100)
    settings = ServerSettings(host="127.0.0.1", port=free_port(), model_dir=tmp_path)
    with running_server(None, settings) as url:
        peer = await WirePeer.open(url)
        await peer.send({"text": "This voice is broken.", "voice": "zz_damaged", "request_id": "bad"})
        await peer.send({"text": "This one works.", "request_id": "good"})
        failed = await peer.answer()
        assert failed.last["type"] == "error" and failed.last["code"] == "internal"
        assert failed.last["request_id"] == "bad" and "reshape" not in failed.last["message"]
        assert (await peer.answer()).kinds == ["synthesis_start", "synthesis_complete"]
        await peer.close()


WRITTEN = "It costs $5, said Dr. Lee. This is **bold** text."
WRITTEN_WORDS = ["It", "costs", "$5,", "said", "Dr.", "Lee.", "This", "is", "bold", "text."]


def words_of(answer) -> list[dict]:
    return [word for frame in answer.frames if frame["type"] == "word_timestamps" for word in frame["words"]]


def assert_written(words: list[dict], text: str, expected: list[str]) -> None:
    """The words as the client wrote them, at their offsets in the text sent, in time order."""
    assert [w["word"] for w in words] == expected
    for word in words:
        assert word["word"] in text[word["start_char"] : word["end_char"]].replace("**", "")
    assert [w["start_s"] for w in words] == sorted(w["start_s"] for w in words)


async def test_a_streamed_utterance_is_one_request_in_the_writers_words(speech_server: str) -> None:
    """Text in pieces (`continue`), cut where the pieces fall ("$", "5,"; "Dr", ". Lee"), is
    answered as one request: one start, the words as written with their offsets in the whole
    text, all the audio, one complete; a whole request after it is answered as before."""
    peer = await WirePeer.open(speech_server)
    pieces = ["It costs $", "5, said Dr", ". Lee. This is **bo", "ld** text."]
    for index, piece in enumerate(pieces):
        await peer.send({"text": piece, "request_id": "u1", "continue": True, "word_timestamps": index == 0})
    await peer.send({"text": "", "request_id": "u1", "continue": False})
    await peer.send({"text": "Hello there.", "request_id": "after"})
    answer = await peer.answer()
    assert answer.kinds[0] == "synthesis_start" and answer.kinds[-1] == "synthesis_complete"
    assert set(answer.kinds[1:-1]) == {"word_timestamps"}
    assert_written(words_of(answer), "".join(pieces), WRITTEN_WORDS)
    complete = answer.last
    assert complete["audio_bytes"] == len(answer.audio) > 0
    assert words_of(answer)[-1]["end_s"] <= complete["total_duration_s"] + 1e-6
    after = await peer.answer()
    assert after.request_id == "after" and after.kinds == ["synthesis_start", "synthesis_complete"]
    await peer.close()


async def test_streamed_pieces_get_the_usual_errors(speech_server: str) -> None:
    peer = await WirePeer.open(speech_server)
    await peer.send({"text": "Hi", "continue": True})
    assert (await peer.answer()).last["code"] == "invalid_message"  # no request_id to share
    await peer.send({"text": "Hi", "request_id": "f", "continue": True, "format": "wav"})
    assert (await peer.answer()).last == {"type": "error", "request_id": "f", "code": "unsupported_format",
                                          "message": "a streamed utterance's format must be pcm16 or mulaw"}
    await peer.send({"text": "Hi", "request_id": "v", "continue": True, "voice": "nobody"})
    assert (await peer.answer()).last["code"] == "unknown_voice"
    # "w" is whole and waits behind an utterance left open, so it is still unsent (its id taken)
    # when its continuation comes, however fast the server renders; the error frame is queued
    # behind the answers before it
    await peer.send({"text": "Hold on.", "request_id": "open", "continue": True})
    await peer.send({"text": "Hello there.", "request_id": "w"})
    await peer.send({"text": " more", "request_id": "w", "continue": False})
    await peer.send({"text": "", "request_id": "open", "continue": False})
    answers = [await peer.answer() for _ in range(3)]
    assert [(a.request_id, a.last["type"]) for a in answers] == [
        ("open", "synthesis_complete"), ("w", "synthesis_complete"), ("w", "error")]
    assert answers[2].last["code"] == "invalid_message"  # w was whole: it takes no more text
    await peer.send({"text": "A long answer that will not be heard", "request_id": "c", "continue": True})
    await peer.send({"type": "cancel", "request_id": "c"})
    assert (await peer.answer()).last == {"type": "synthesis_cancelled", "request_id": "c"}
    await peer.close()
