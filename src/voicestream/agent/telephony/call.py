"""One phone call on the agent's edge: a carrier's media stream, whatever the carrier, over
the same conversation as the Realtime face (`RealtimeSession`: turn detection, barge-in,
transcription, answers, memory).

The carrier's protocol machine (`CarrierMachine`) reads each frame into commands; this
module acts on them, once for every carrier:

- **the audio path**: the caller's audio (G.711 or L16, at the carrier's rate) to the 16 kHz
  the recognizer hears, through one resampler for the call; each answer's pcm16 at 24 kHz to
  the carrier's codec and rate through one resampler for that answer (no clicks at chunk
  edges), sent in pieces of `PIECE_MS`, each followed by a mark;
- **what was heard**: the carrier says a mark's name back once the audio before it has
  played, so the last mark echoed is how much of the answer the caller heard. When the
  caller speaks over an answer (the session's `speech_started`) the carrier's buffer is
  cleared and the answer is truncated in the conversation to what had played, as a
  Realtime client's `conversation.item.truncate` does;
- **the greeting** is spoken when the stream starts; **DTMF** digits become user turns
  (`dtmf_template`); **a hang-up** (the carrier's stop, or the socket closing) closes the
  session at once: its answer, LLM, speech session and transcriptions stop.

Garbage, frames over `MAX_FRAME_BYTES` and illegal transitions close the stream (1008) with
the reason logged; the edge's idle clock closes a stream that sends nothing.
"""

from __future__ import annotations

import base64
import json
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from voicestream.agent.realtime.codecs import ANALYSIS_RATE, SPEECH_RATE
from voicestream.agent.realtime.session import RealtimeSession
from voicestream.agent.service import AgentService
from voicestream.agent.settings import TelephonySettings
from voicestream.agent.telephony.machine import CarrierMachine
from voicestream.audio import (
    StreamResampler,
    alaw_to_float,
    float_to_alaw,
    float_to_mulaw,
    mulaw_to_float,
)
from voicestream.audio.pcm import FloatArray, float_to_pcm16, pcm16_to_float
from voicestream.edge.connection import POLICY, Connection, PeerTransport, serve_connection
from voicestream.protocol import SpeechFault
from voicestream.protocol.realtime import (
    ErrorEvent,
    InputTranscriptionCompleted,
    OutputAudioDelta,
    OutputAudioDone,
    RealtimeError,
    ServerEvent,
    SpeechStarted,
    parse_client_event,
)
from voicestream.protocol.telephony import (
    MAX_FRAME_BYTES,
    Audio,
    CarrierError,
    Codec,
    Command,
    Digits,
    HungUp,
    Played,
    Started,
)

logger = logging.getLogger(__name__)

PIECE_MS = 60
"""Audio sent between two marks: what was heard is known to within this (and the echo's trip)."""
MAX_MARKS = 4096
"""Marks waiting for their echo (a few minutes of answer); beyond, the oldest count as played."""
MAX_QUEUED_DELTAS = 64
"""Frames waiting in the outbox beyond which an answer waits before queueing more."""
TURN_DETECTION = {"type": "semantic_vad", "create_response": True, "interrupt_response": True}
"""A call's turns, as a Realtime client asks for them (served by `server_vad` where the
end-of-turn model is not installed)."""


def decode(codec: Codec, data: bytes) -> FloatArray:
    if codec is Codec.MULAW:
        return mulaw_to_float(data)
    if codec is Codec.ALAW:
        return alaw_to_float(data)
    return pcm16_to_float(data[: len(data) // 2 * 2])


def encode(codec: Codec, samples: FloatArray) -> bytes:
    if codec is Codec.MULAW:
        return float_to_mulaw(samples).tobytes()
    if codec is Codec.ALAW:
        return float_to_alaw(samples).tobytes()
    return float_to_pcm16(samples).tobytes()


@dataclass(frozen=True, slots=True)
class _Mark:
    name: str
    item_id: str
    end_ms: int
    """How much of the item's audio has played once this mark comes back."""


class _Deltas:
    """One answer's frames (`voicestream.edge.connection.Stream`)."""

    __slots__ = ("dropped",)

    def __init__(self) -> None:
        self.dropped = False


class _Speaker:
    """One answer's audio on its way to the carrier: resampled (one stream for the answer),
    encoded, and cut into pieces of `PIECE_MS` (whole frames, where the carrier takes only
    frames of one size), each with how much of the answer has been sent once it is."""

    def __init__(self, machine: CarrierMachine, item_id: str) -> None:
        self.item_id = item_id
        self._codec, self._rate, self._frame = machine.codec, machine.rate, machine.frame_bytes
        self._resampler = StreamResampler(SPEECH_RATE, machine.rate)
        self._width = 2 if machine.codec is Codec.L16 else 1
        self._piece_bytes = machine.rate * PIECE_MS // 1000 * self._width
        self._held = b""
        self._sent_bytes = 0

    def pieces(self, pcm16: bytes, last: bool = False) -> list[tuple[bytes, int]]:
        """The pieces `pcm16` completes (all that is left, at the `last`), each with the
        answer's milliseconds sent once it is."""
        samples = self._resampler.process(pcm16_to_float(pcm16))
        if last:
            samples = np.concatenate([samples, self._resampler.flush()])
        data = self._held + encode(self._codec, samples)
        size = self._piece_bytes
        cut = len(data) if last else len(data) // size * size
        self._held = data[cut:]
        pieces = []
        for start in range(0, cut, size):
            piece = data[start : start + size]
            if self._frame and len(piece) % self._frame:
                piece += bytes(self._frame - len(piece) % self._frame)  # silence to a whole frame
            self._sent_bytes += len(piece)
            pieces.append((piece, self._sent_bytes // self._width * 1000 // self._rate))
        return pieces


class TelephonyCall(Connection):
    """One carrier media stream from accept to close; the agent's drain sees it."""

    faults: ClassVar[tuple[type[Exception], ...]] = ()

    def __init__(
        self, transport: PeerTransport, service: AgentService, slot: object,
        machine: CarrierMachine, options: TelephonySettings,
    ) -> None:
        super().__init__(transport, service, slot)
        self.kind = f"{machine.carrier} call"
        self.machine = machine
        self.options = options
        self.session = RealtimeSession(service, self._put, self._drop, None)
        self.call_id: str | None = None
        self._codec = Codec.MULAW
        self._hearing: StreamResampler | None = None
        self._speakers: dict[str, _Speaker] = {}
        """Answers being sent, by response id."""
        self._deltas: dict[str, _Deltas] = {}
        self._marks: deque[_Mark] = deque()
        self._played: tuple[str, int] | None = None
        """(item id, ms) the last mark echoed says has played."""
        self._cut: tuple[str, int] | None = None
        """(item id, ms heard) of an answer cut by the caller, to truncate once cancelled."""
        self._mark_count = 0

    @classmethod
    def fault_frame(cls, fault: SpeechFault) -> None:
        """A refusal (the agent full or draining): carriers have no error frame, so nothing
        but the close (1013 try again later, 1001 going away), which the edge logs."""

    @property
    def has_unsent(self) -> bool:
        return self.session.response is not None or self.session.busy

    @property
    def marks_waiting(self) -> int:
        """Marks sent whose audio the carrier has not said it played."""
        return len(self._marks)

    def transcript(self) -> list[tuple[str, str, str]]:
        """The call as the agent holds it: (item id, role, text) of each item in order, the
        caller's turns as the recognizer heard them, the answers as the caller heard them."""
        return [(entry.item.id, entry.item.role, entry.text) for entry in self.session.conversation.entries]

    async def handle(self, message: str | bytes) -> None:
        if len(message) > MAX_FRAME_BYTES:
            self._refuse(f"a frame of {len(message)} bytes (at most {MAX_FRAME_BYTES})")
            return
        try:
            commands = self.machine.receive(message)
        except CarrierError as error:
            self._refuse(str(error))
            return
        for command in commands:
            await self._act(command)
        self.accepted()

    def _refuse(self, why: str) -> None:
        logger.warning("closing %s (%s): %s (1008)", self.a_kind, self.call_id or "not started", why)
        self.go_away(POLICY)

    async def release(self) -> None:
        await self.session.close()

    # --- the carrier's commands ---------------------------------------------------------

    async def _act(self, command: Command) -> None:
        match command:
            case Started():
                await self._start(command)
            case Audio():
                if self._hearing is not None:
                    await self.session.hear(self._hearing.process(decode(self._codec, command.data)))
                    await self._truncate_cut()
            case Played():
                self._echoed(command.name)
            case Digits():
                await self._pressed(command.digits)
            case HungUp():
                logger.info("%s (%s) hung up", self.a_kind, self.call_id)
                await self.session.close()
                self.finish()

    async def _start(self, started: Started) -> None:
        self.call_id = started.call_id
        self._codec = started.codec
        self._hearing = StreamResampler(started.rate, ANALYSIS_RATE)
        logger.info("%s (%s) started: %s at %d Hz", self.a_kind, started.call_id, started.codec.value, started.rate)
        try:
            await self._client_event({"type": "session.update", "session": {"audio": {"input": {"turn_detection": TURN_DETECTION}}}})
        except RealtimeError as error:  # no recognizer here: the call is spoken to, not heard
            logger.warning("%s cannot hear the caller: %s", self.a_kind, error.message)
        if self.options.greeting:
            try:
                await self.session.say(self.options.greeting)
            except RealtimeError as error:  # the agent at its answers' limit: the call goes on ungreeted
                logger.warning("%s (%s) not greeted: %s", self.a_kind, self.call_id, error.message)

    async def _pressed(self, digits: str) -> None:
        """Keys pressed: a user turn of their own, answered (cutting any answer playing)."""
        self._barge_in()
        if self.session.response is not None:
            await self._client_event({"type": "response.cancel"})
        await self._truncate_cut()
        text = self.options.dtmf_template.format(digits=digits)
        item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        await self._client_event({"type": "conversation.item.create", "item": item})
        await self._client_event({"type": "response.create"})

    async def _client_event(self, event: dict[str, object]) -> None:
        await self.session.handle(parse_client_event(json.dumps(event)))

    # --- what was heard -----------------------------------------------------------------

    def _echoed(self, name: str) -> None:
        if not any(mark.name == name for mark in self._marks):
            return  # a mark of audio already cleared
        while self._marks:
            mark = self._marks.popleft()
            self._played = (mark.item_id, mark.end_ms)
            if mark.name == name:
                return

    def _barge_in(self) -> None:
        """The caller speaks (or presses a key) over what is playing: clear the carrier's
        buffer, and remember how much of the answer it had played, to truncate the answer
        to that once the session has cancelled it."""
        if not self._marks:
            return
        item_id = self._marks[0].item_id
        heard = self._played[1] if self._played and self._played[0] == item_id else 0
        self._cut = (item_id, heard)
        self._marks.clear()
        self.queue(self.machine.clear())
        logger.info("%s (%s): cleared the caller's audio; %d ms of the answer played", self.a_kind, self.call_id, heard)

    async def _truncate_cut(self) -> None:
        if self._cut is None:
            return
        (item_id, heard), self._cut = self._cut, None
        entry = self.session.conversation.find(item_id)
        if entry is None or entry.turn is None:
            return
        spoken_ms = int(sum(piece.duration_s for piece in entry.turn.pieces) * 1000)
        truncate = {"type": "conversation.item.truncate", "item_id": item_id, "audio_end_ms": min(heard, spoken_ms)}
        await self._client_event(truncate)

    # --- the session's events -----------------------------------------------------------

    async def _put(self, event: ServerEvent, response_id: str | None) -> None:
        match event:
            case OutputAudioDelta():
                await self._speak(event.response_id, event.item_id, event.delta, last=False)
            case OutputAudioDone():
                await self._speak(event.response_id, event.item_id, "", last=True)
            case SpeechStarted():
                self._barge_in()
            case InputTranscriptionCompleted():
                logger.info("%s (%s) heard: %s", self.a_kind, self.call_id, event.transcript)
            case ErrorEvent():
                logger.warning("%s (%s): %s", self.a_kind, self.call_id, event.error)

    async def _speak(self, response_id: str, item_id: str, delta: str, last: bool) -> None:
        speaker = self._speakers.get(response_id)
        if speaker is None:
            if last:  # a cut answer's end
                self._deltas.pop(response_id, None)
                return
            speaker = self._speakers[response_id] = _Speaker(self.machine, item_id)
        if last:
            del self._speakers[response_id]
        stream = self._deltas.setdefault(response_id, _Deltas())
        frame_bytes = self.machine.frame_bytes
        for piece, end_ms in speaker.pieces(base64.b64decode(delta), last=last):
            for start in range(0, len(piece), frame_bytes or len(piece)):
                await self.emit(self.machine.media(piece[start : start + (frame_bytes or len(piece))]), stream, MAX_QUEUED_DELTAS)
            if stream.dropped:
                return
            await self._mark(item_id, end_ms, stream)
        if last:
            self._deltas.pop(response_id, None)

    async def _mark(self, item_id: str, end_ms: int, stream: _Deltas) -> None:
        self._mark_count += 1
        mark = _Mark(f"{self._mark_count}", item_id, end_ms)
        if len(self._marks) >= MAX_MARKS:
            oldest = self._marks.popleft()
            self._played = (oldest.item_id, oldest.end_ms)
        self._marks.append(mark)
        await self.emit(self.machine.mark(mark.name), stream, MAX_QUEUED_DELTAS)

    def _drop(self, response_id: str) -> None:
        self._deltas.setdefault(response_id, _Deltas()).dropped = True
        self._speakers.pop(response_id, None)
        self.dropped()


async def serve_call(
    transport: PeerTransport, service: AgentService, machine: Callable[[], CarrierMachine], options: TelephonySettings,
) -> None:
    """Run one call's media stream to its end (a route's handler, once the carrier is let in)."""
    await serve_connection(
        transport, service, lambda slot: TelephonyCall(transport, service, slot, machine(), options),
        TelephonyCall.fault_frame,
    )
