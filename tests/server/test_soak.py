"""The soak in its CI form: a few sessions speaking back to back for a few seconds; the full
32 sessions for 2 minutes is `voicestream bench chaos`."""

from __future__ import annotations

import os

from voicestream.bench.chaos import soak


async def test_short_soak_has_no_errors(speech_server: str) -> None:
    report = await soak(speech_server, sessions=4, duration_s=6, server_pid=os.getpid())
    assert report.errors == {} and report.busy == 0
    assert report.requests >= 4 and len(report.first_audio_s) >= report.requests
    assert report.samples and all(fds > 0 for _, _, fds in report.samples)
