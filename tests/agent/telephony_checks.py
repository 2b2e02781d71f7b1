"""Stand-in carriers for the phone-call tests: Twilio, Telnyx, Plivo and Vonage cannot be
reached from here, so a stand-in plays each one's part over a real WebSocket, in its
documented wire shapes exactly (and as pipecat's serializers read them): it fetches the
webhook's answer, opens the stream it names, sends the caller's audio in 20 ms frames in
real time, and plays the agent's audio at real-time pace, saying each mark back once the
audio before it has played; a clear drops what has not played and says the marks left back
at once, as Twilio documents."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
from websockets.asyncio.client import ClientConnection, connect

from voicestream.audio import float_to_mulaw, resample
from voicestream.audio.pcm import float_to_pcm16, pcm16_to_float

FRAME_S = 0.02


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
        """An agent frame as ("media", bytes), ("mark", name) or ("clear", None)."""
        if isinstance(frame, bytes):
            assert self.name == "vonage" and len(frame) == 640
            return "media", frame
        message = json.loads(frame)
        kind = message.get("event") or message.get("action")
        if self.name == "twilio":
            assert message["streamSid"] == "MZ1"
        if self.name == "plivo":
            assert message["streamId"] == "st1"
        if kind in ("media", "playAudio"):
            if self.name == "plivo":
                assert message["media"]["contentType"] == "audio/x-mulaw" and message["media"]["sampleRate"] == 8000
            return "media", base64.b64decode(message["media"]["payload"])
        if kind in ("mark", "checkpoint", "notify"):
            name = message.get("name") or (message.get("mark") or message.get("payload"))["name"]
            return "mark", name
        assert kind in ("clear", "clearAudio"), message
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


CARRIERS = {
    "twilio": Carrier("twilio", 8000, 1),
    "telnyx": Carrier("telnyx", 8000, 1),
    "plivo": Carrier("plivo", 8000, 1),
    "vonage": Carrier("vonage", 16000, 2),
}


@dataclass
class StandIn:
    """The carrier's side of one call: what it received, what it played, when it cleared."""

    carrier: Carrier
    socket: ClientConnection
    to_play: deque[list[Any]] = field(default_factory=deque)
    """["audio", bytes left] and ["mark", name], in the order they came."""
    frames: list[tuple[float, str, Any]] = field(default_factory=list)
    """(time, kind, value) of every agent frame."""
    played_bytes: int = 0
    clears: list[tuple[float, int]] = field(default_factory=list)
    """(time, bytes played by then) of each clear."""
    speaking: deque[bytes] = field(default_factory=deque)
    """The caller's frames still to send."""
    _tasks: list[asyncio.Task[Any]] = field(default_factory=list)

    @property
    def bytes_per_s(self) -> int:
        return self.carrier.rate * self.carrier.width

    @property
    def playing(self) -> bool:
        return any(entry[0] == "audio" for entry in self.to_play)

    def say(self, pcm24k: bytes, then_silence_s: float = 1.0) -> None:
        audio = self.carrier.encode(pcm24k)
        silence = bytes(int(self.carrier.rate * then_silence_s) * self.carrier.width)
        if self.carrier.width == 1:
            silence = float_to_mulaw(np.zeros(len(silence), np.float32)).tobytes()
        data = audio + silence
        size = int(self.carrier.rate * FRAME_S) * self.carrier.width
        self.speaking.extend(data[i : i + size] for i in range(0, len(data) - size + 1, size))

    def kinds(self, kind: str) -> list[tuple[float, Any]]:
        return [(at, value) for at, seen, value in self.frames if seen == kind]

    async def run(self) -> None:
        for frame in self.carrier.start():
            await self.socket.send(frame)
        self._tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._clock())]

    async def stop(self) -> None:
        stop = self.carrier.stop()
        if stop is not None:
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
        tick = 0
        while True:
            tick += 1
            await asyncio.sleep(max(0.0, start + tick * FRAME_S - time.monotonic()))
            await self.socket.send(self.carrier.caller_frame(self.speaking.popleft() if self.speaking else silence))
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
    assert found is not None, answer.text
    return found.group(1).replace("&amp;", "&")


@contextlib.asynccontextmanager
async def call(stream_url: str, carrier: str, headers: dict[str, str] | None = None):
    async with connect(stream_url, additional_headers=headers or {}) as socket:
        stand_in = StandIn(CARRIERS[carrier], socket)
        await stand_in.run()
        try:
            yield stand_in
        finally:
            await stand_in.stop()


async def until(condition: Any, timeout_s: float, what: str) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.02)
