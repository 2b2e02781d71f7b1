"""Stand-in phone carriers: Twilio, Telnyx, Plivo and Vonage cannot be reached from here, so a
stand-in plays each one's part over a real WebSocket, in its documented wire shapes exactly
(Twilio's Media Streams messages, Telnyx's and Plivo's streams, Vonage's websocket: as their
docs and pipecat's serializers give them). It fetches the webhook's answer, opens the stream it
names, sends the caller's audio in 20 ms frames in real time, and plays the agent's audio at
real-time pace, saying each mark back once the audio before it has played; a clear drops what
has not played and says the marks left back at once, as Twilio documents.

`bench telephony` measures a call through it, and the phone-call tests drive the agent with it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import re
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
from websockets.asyncio.client import ClientConnection, connect

from voicestream.audio import float_to_mulaw, resample
from voicestream.audio.pcm import float_to_pcm16, pcm16_to_float

FRAME_S = 0.02
MAX_FRAMES_KEPT = 30_000
"""The agent's frames a stand-in remembers (ten minutes of 20 ms frames); older ones go first."""
MAX_DEPARTURES_KEPT = 30_000
"""When each of the caller's last frames left (ten minutes of them)."""


class CarrierRefused(ValueError):
    """The agent sent a frame the carrier would not take (a wrong shape, stream id or format)."""


def _require(condition: bool, what: str, frame: object) -> None:
    if not condition:
        raise CarrierRefused(f"{what}: {frame!r:.200}")


@dataclass
class Carrier:
    """One carrier's wire shapes, as its stand-in speaks them."""

    name: str
    rate: int
    """The caller's audio and the agent's, both ways."""
    width: int
    """Bytes a sample: 1 (mu-law), 2 (L16)."""

    def start(self) -> list[str]:
        if self.name == "twilio":
            return [json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}), json.dumps({
                "event": "start", "sequenceNumber": "1", "streamSid": "MZ1",
                "start": {"accountSid": "AC1", "streamSid": "MZ1", "callSid": "CA1", "tracks": ["inbound"],
                          "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
                          "customParameters": {}}})]
        if self.name == "telnyx":
            return [json.dumps({"event": "connected", "version": "1.0.0"}), json.dumps({
                "event": "start", "sequence_number": "1", "stream_id": "s1",
                "start": {"call_control_id": "v3:c1",
                          "media_format": {"encoding": "PCMU", "sample_rate": 8000, "channels": 1}}})]
        if self.name == "plivo":
            return [json.dumps({
                "event": "start", "sequenceNumber": 0,
                "start": {"callId": "call1", "streamId": "st1", "tracks": ["inbound"],
                          "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000}}})]
        return [json.dumps({"event": "websocket:connected", "content-type": "audio/l16;rate=16000"})]

    def caller_frame(self, audio: bytes) -> str | bytes:
        if self.name == "vonage":
            return audio
        payload = base64.b64encode(audio).decode()
        if self.name == "twilio":
            return json.dumps({"event": "media", "streamSid": "MZ1",
                               "media": {"track": "inbound", "chunk": "1", "timestamp": "0", "payload": payload}})
        if self.name == "telnyx":
            return json.dumps({"event": "media", "stream_id": "s1",
                               "media": {"track": "inbound", "chunk": "1", "timestamp": "0", "payload": payload}})
        return json.dumps({"event": "media", "streamId": "st1",
                           "media": {"track": "inbound", "timestamp": "0", "chunk": 1, "payload": payload}})

    def read(self, frame: str | bytes) -> tuple[str, Any]:
        """An agent frame as ("media", bytes), ("mark", name) or ("clear", None); a frame the
        carrier would not take raises `CarrierRefused`."""
        if isinstance(frame, bytes):
            _require(self.name == "vonage" and len(frame) == 640, "binary audio that is not 20 ms of L16 at 16 kHz", frame)
            return "media", frame
        message = json.loads(frame)
        kind = message.get("event") or message.get("action")
        if self.name == "twilio":
            _require(message.get("streamSid") == "MZ1", "not this call's streamSid", message)
        if self.name == "plivo":
            _require(message.get("streamId") == "st1", "not this call's streamId", message)
        if kind in ("media", "playAudio"):
            if self.name == "plivo":
                media = message["media"]
                _require(media.get("contentType") == "audio/x-mulaw" and media.get("sampleRate") == 8000,
                         "playAudio not in the stream's format", message)
            return "media", base64.b64decode(message["media"]["payload"])
        if kind in ("mark", "checkpoint", "notify"):
            name = message.get("name") or (message.get("mark") or message.get("payload"))["name"]
            return "mark", name
        _require(kind in ("clear", "clearAudio"), "an unknown message", message)
        return "clear", None

    def played(self, name: str) -> str:
        if self.name == "twilio":
            return json.dumps({"event": "mark", "sequenceNumber": "9", "streamSid": "MZ1", "mark": {"name": name}})
        if self.name == "telnyx":
            return json.dumps({"event": "mark", "stream_id": "s1", "mark": {"name": name}})
        if self.name == "plivo":
            return json.dumps({"event": "playedStream", "streamId": "st1", "name": name})
        return json.dumps({"event": "websocket:notify", "payload": {"name": name}})

    def dtmf(self, digit: str) -> str:
        if self.name == "vonage":
            return json.dumps({"event": "websocket:dtmf", "digit": digit, "duration": 200})
        return json.dumps({"event": "dtmf", "streamSid": "MZ1", "dtmf": {"track": "inbound_track", "digit": digit}})

    def stop(self) -> str | None:
        return None if self.name == "vonage" else json.dumps({"event": "stop", "streamSid": "MZ1"})

    def encode(self, pcm24k: bytes) -> bytes:
        """Speech (pcm16 at 24 kHz) as the caller's phone sends it."""
        samples = resample(pcm16_to_float(pcm24k), 24000, self.rate)
        return float_to_pcm16(samples).tobytes() if self.width == 2 else float_to_mulaw(samples).tobytes()

    @property
    def frame_bytes(self) -> int:
        return int(self.rate * FRAME_S) * self.width


CARRIERS = {
    "twilio": Carrier("twilio", 8000, 1),
    "telnyx": Carrier("telnyx", 8000, 1),
    "plivo": Carrier("plivo", 8000, 1),
    "vonage": Carrier("vonage", 16000, 2),
}


@dataclass(frozen=True, slots=True)
class Said:
    """Speech queued by `StandIn.say`: the caller's frame it starts in (counted from the
    call's first) and how many samples it lasts at the carrier's rate."""

    first_frame: int
    samples: int


@dataclass
class StandIn:
    """The carrier's side of one call: what it received, what it played, when it cleared."""

    carrier: Carrier
    socket: ClientConnection
    to_play: deque[list[Any]] = field(default_factory=deque)
    """["audio", bytes left] and ["mark", name], in the order they came."""
    frames: deque[tuple[float, str, Any]] = field(default_factory=lambda: deque(maxlen=MAX_FRAMES_KEPT))
    """(time.monotonic(), kind, value) of the agent's frames."""
    played_bytes: int = 0
    clears: list[tuple[float, int]] = field(default_factory=list)
    """(time, bytes played by then) of each clear."""
    speaking: deque[bytes] = field(default_factory=deque)
    """The caller's frames still to send."""
    sent_frames: int = 0
    departures: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=MAX_DEPARTURES_KEPT))
    """(index, time.monotonic()) of the caller's frames as they left."""
    late_s: float = 0.0
    """How far behind the wall clock the slowest frame left (a loaded machine)."""
    _tasks: list[asyncio.Task[Any]] = field(default_factory=list)

    @property
    def bytes_per_s(self) -> int:
        return self.carrier.rate * self.carrier.width

    @property
    def playing(self) -> bool:
        return any(entry[0] == "audio" for entry in self.to_play)

    def say(self, pcm24k: bytes, then_silence_s: float = 1.0) -> Said:
        """Queue speech (pcm16 at 24 kHz) and then silence, after what is queued already."""
        audio = self.carrier.encode(pcm24k)
        silence = bytes(int(self.carrier.rate * then_silence_s) * self.carrier.width)
        if self.carrier.width == 1:
            silence = float_to_mulaw(np.zeros(len(silence), np.float32)).tobytes()
        data = audio + silence
        size = self.carrier.frame_bytes
        said = Said(self.sent_frames + len(self.speaking), len(audio) // self.carrier.width)
        self.speaking.extend(data[i : i + size] for i in range(0, len(data) - size + 1, size))
        return said

    def moment(self, frame: int, sample: int) -> float | None:
        """When the caller said `sample` (at the carrier's rate) of the speech that starts in
        `frame`: when its frame left, less the audio after it in the frame; None before then."""
        per_frame = self.carrier.frame_bytes // self.carrier.width
        index = frame + sample // per_frame
        if not self.departures or not self.departures[0][0] <= index < self.sent_frames:
            return None
        _, left = self.departures[index - self.departures[0][0]]
        return left - (per_frame - sample % per_frame) / self.carrier.rate

    def kinds(self, kind: str) -> list[tuple[float, Any]]:
        return [(at, value) for at, seen, value in self.frames if seen == kind]

    def first(self, kind: str, since: float) -> float | None:
        """When the first agent frame of `kind` at or after `since` came (looking back from
        the last frame only as far as `since`)."""
        found = None
        for at, seen, _ in reversed(self.frames):
            if at < since:
                break
            if seen == kind:
                found = at
        return found

    async def run(self) -> None:
        for frame in self.carrier.start():
            await self.socket.send(frame)
        self._tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._clock())]

    async def stop(self) -> None:
        stop = self.carrier.stop()
        if stop is not None:
            with contextlib.suppress(Exception):
                await self.socket.send(stop)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.socket.close()

    async def _read(self) -> None:
        async for frame in self.socket:
            kind, value = self.carrier.read(frame)
            self.frames.append((time.monotonic(), kind, value))
            if kind == "media":
                self.to_play.append(["audio", len(value)])
            elif kind == "mark":
                self.to_play.append(["mark", value])
            else:
                self.clears.append((time.monotonic(), self.played_bytes))
                marks = [entry[1] for entry in self.to_play if entry[0] == "mark"]
                self.to_play.clear()
                for name in marks:  # what Twilio does with the marks of cleared audio
                    await self.socket.send(self.carrier.played(name))

    async def _clock(self) -> None:
        """Every 20 ms: send the caller's next frame (silence when the caller is quiet), and
        play 20 ms of the agent's audio, saying back each mark it reaches."""
        silence = self.carrier.encode(bytes(int(24000 * FRAME_S) * 2))
        start = time.monotonic()
        while True:
            due = start + (self.sent_frames + 1) * FRAME_S
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            self.late_s = max(self.late_s, time.monotonic() - due)
            await self.socket.send(self.carrier.caller_frame(self.speaking.popleft() if self.speaking else silence))
            self.departures.append((self.sent_frames, time.monotonic()))
            self.sent_frames += 1
            budget = int(self.bytes_per_s * FRAME_S)
            while self.to_play:
                entry = self.to_play[0]
                if entry[0] == "mark":
                    self.to_play.popleft()
                    await self.socket.send(self.carrier.played(entry[1]))
                    continue
                if budget == 0:
                    break
                taken = min(budget, entry[1])
                entry[1] -= taken
                budget -= taken
                self.played_bytes += taken
                if entry[1] == 0:
                    self.to_play.popleft()


async def webhook_stream_url(base: str, carrier: str, headers: dict[str, str] | None = None,
                             body: str = "CallSid=CA1") -> str:
    """The stream URL the carrier's webhook answers with (TwiML, TeXML, Plivo XML or NCCO):
    Vonage GETs its answer URL, the others POST a form `body`."""
    async with httpx.AsyncClient() as client:
        if carrier == "vonage":
            answer = await client.get(f"{base}/telephony/vonage", headers=headers)
            answer.raise_for_status()
            return answer.json()[0]["endpoint"][0]["uri"]
        form_type = {"Content-Type": "application/x-www-form-urlencoded"}
        answer = await client.post(f"{base}/telephony/{carrier}", content=body, headers={**form_type, **(headers or {})})
        answer.raise_for_status()
    found = re.search(r'url="([^"]+)"', answer.text) or re.search(r">(wss?://[^<]+)<", answer.text)
    if found is None:
        raise CarrierRefused(f"a webhook answer that names no stream: {answer.text!r:.200}")
    return found.group(1).replace("&amp;", "&")


@contextlib.asynccontextmanager
async def call(stream_url: str, carrier: str, headers: dict[str, str] | None = None) -> AsyncIterator[StandIn]:
    """A call over the stream at `stream_url`, the carrier's stand-in on the line."""
    async with connect(stream_url, additional_headers=headers or {}) as socket:
        stand_in = StandIn(CARRIERS[carrier], socket)
        await stand_in.run()
        try:
            yield stand_in
        finally:
            await stand_in.stop()
