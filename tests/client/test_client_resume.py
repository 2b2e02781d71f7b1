"""A session whose server goes away mid-answer resumes on another: nothing missing, nothing
spoken twice. The first server is a real `voicestream serve` process, killed or drained
(SIGTERM with no grace: its sessions close with 1001) after the first audio; the second is
the suite's server on another port, named in the resume policy."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator

import pytest
from tests.server.wire import serve_process

from voicestream.client import (
    AudioChunk,
    ResumePolicy,
    SpeechCompleted,
    SpeechFailed,
    SpeechSession,
    SpeechStarted,
)

SENTENCES = [
    "The first sentence is long enough to be cut off while it is being spoken.",
    "The second one waits in the queue.",
    "And the third one ends the answer.",
]


@pytest.fixture
def doomed_server(engine) -> Iterator[tuple[subprocess.Popen, str]]:
    with serve_process(engine.files.model_path.parent, "--grace-s", "0") as started:
        yield started


@pytest.mark.parametrize("ending", [signal.SIGKILL, signal.SIGTERM], ids=["killed", "drained-1001"])
async def test_an_answer_survives_its_server_going_away(doomed_server, speech_server: str, ending: int) -> None:
    process, url = doomed_server
    policy = ResumePolicy(attempts=5, backoff_s=0.1, urls=[speech_server])
    events = []
    async with await SpeechSession.connect(url, resume=policy) as session:
        for index, sentence in enumerate(SENTENCES):
            await session.submit(sentence, request_id=f"r{index}")
        async for event in session.events():
            events.append(event)
            if isinstance(event, AudioChunk) and process.poll() is None:
                process.send_signal(ending)
                process.wait(30)
            if sum(isinstance(e, SpeechCompleted | SpeechFailed) for e in events) == len(SENTENCES):
                break
    assert session.resumes == 1
    assert not [e for e in events if isinstance(e, SpeechFailed)]
    for index in range(len(SENTENCES)):
        rid = f"r{index}"
        assert sum(isinstance(e, SpeechStarted) and e.request_id == rid for e in events) == 1
        done = [e for e in events if isinstance(e, SpeechCompleted) and e.request_id == rid]
        assert len(done) == 1
        received = sum(len(e.data) for e in events if isinstance(e, AudioChunk) and e.request_id == rid)
        # the resumed request skips what arrived from the first server: about one copy, not two
        assert received == pytest.approx(done[0].audio_bytes, abs=24_000 * 2 // 5)
    assert [e.request_id for e in events if isinstance(e, SpeechCompleted)] == ["r0", "r1", "r2"]
