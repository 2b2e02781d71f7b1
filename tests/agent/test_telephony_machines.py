"""Each carrier's media-stream machine as a table, no socket: the frames each carrier sends
(its documented shapes, as pipecat's serializers read them) to commands, and the frames the
agent sends back; garbage and illegal transitions are `CarrierError`s."""

from __future__ import annotations

import base64
import json

import pytest

from voicestream.agent.telephony.plivo import PlivoStream, plivo_xml
from voicestream.agent.telephony.telnyx import TelnyxStream, texml
from voicestream.agent.telephony.twilio import TwilioStream, twiml
from voicestream.agent.telephony.vonage import FRAME_BYTES, VonageStream, ncco
from voicestream.protocol.telephony import (
    Audio,
    CarrierError,
    Codec,
    Digits,
    HungUp,
    Played,
    Started,
    StreamState,
)

PAYLOAD = bytes(range(160))
B64 = base64.b64encode(PAYLOAD).decode()

TWILIO_START = {
    "event": "start", "sequenceNumber": "1", "streamSid": "MZ1",
    "start": {"accountSid": "AC1", "streamSid": "MZ1", "callSid": "CA1", "tracks": ["inbound"],
              "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
              "customParameters": {}},
}
TELNYX_START = {
    "event": "start", "sequence_number": "1", "stream_id": "s1",
    "start": {"user_id": "u", "call_control_id": "v3:c1", "client_state": None,
              "media_format": {"encoding": "PCMA", "sample_rate": 8000, "channels": 1}},
}
PLIVO_START = {
    "event": "start", "sequenceNumber": 0,
    "start": {"callId": "call1", "streamId": "st1", "accountId": "a", "tracks": ["inbound"],
              "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000}},
    "extra_headers": "{}",
}

CASES = [
    # (machine, frames in, commands expected)
    (TwilioStream, [{"event": "connected", "protocol": "Call", "version": "1.0.0"}, TWILIO_START],
     [Started("CA1", Codec.MULAW, 8000)]),
    (TwilioStream, [TWILIO_START, {"event": "media", "sequenceNumber": "2", "streamSid": "MZ1",
                                   "media": {"track": "inbound", "chunk": "1", "timestamp": "5", "payload": B64}}],
     [Started("CA1", Codec.MULAW, 8000), Audio(PAYLOAD)]),
    (TwilioStream, [TWILIO_START, {"event": "mark", "streamSid": "MZ1", "mark": {"name": "7"}},
                    {"event": "dtmf", "streamSid": "MZ1", "dtmf": {"track": "inbound_track", "digit": "5"}},
                    {"event": "stop", "streamSid": "MZ1", "stop": {"accountSid": "AC1", "callSid": "CA1"}}],
     [Started("CA1", Codec.MULAW, 8000), Played("7"), Digits("5"), HungUp()]),
    (TelnyxStream, [{"event": "connected", "version": "1.0.0"}, TELNYX_START,
                    {"event": "media", "stream_id": "s1",
                     "media": {"track": "inbound", "chunk": "1", "timestamp": "5", "payload": B64}},
                    {"event": "media", "stream_id": "s1", "media": {"track": "outbound", "payload": B64}},
                    {"event": "mark", "stream_id": "s1", "mark": {"name": "3"}},
                    {"event": "dtmf", "stream_id": "s1", "dtmf": {"digit": "#"}},
                    {"event": "stop", "stream_id": "s1", "stop": {"call_control_id": "v3:c1"}}],
     [Started("v3:c1", Codec.ALAW, 8000), Audio(PAYLOAD), Played("3"), Digits("#"), HungUp()]),
    (PlivoStream, [PLIVO_START,
                   {"event": "media", "streamId": "st1",
                    "media": {"track": "inbound", "timestamp": "1", "chunk": 1, "payload": B64}},
                   {"event": "playedStream", "streamId": "st1", "name": "4"},
                   {"event": "clearedAudio", "streamId": "st1"},
                   {"event": "dtmf", "streamId": "st1", "dtmf": {"digit": "9", "track": "inbound"}},
                   {"event": "stop"}],
     [Started("call1", Codec.MULAW, 8000), Audio(PAYLOAD), Played("4"), Digits("9"), HungUp()]),
    (VonageStream, [{"event": "websocket:connected", "content-type": "audio/l16;rate=16000"},
                    PAYLOAD * 4,
                    {"event": "websocket:notify", "payload": {"name": "2"}},
                    {"event": "websocket:cleared"},
                    {"event": "websocket:dtmf", "digit": "1", "duration": 250}],
     [Started("vonage", Codec.L16, 16000), Audio(PAYLOAD * 4), Played("2"), Digits("1")]),
]


def frame(message: object) -> str | bytes:
    return message if isinstance(message, bytes) else json.dumps(message)


@pytest.mark.parametrize(("machine", "frames", "expected"), CASES)
def test_each_carriers_frames_become_commands(machine, frames, expected):
    stream = machine()
    commands = [command for message in frames for command in stream.receive(frame(message))]
    assert commands == expected


OUT = [
    (TwilioStream, [TWILIO_START],
     {"event": "media", "streamSid": "MZ1", "media": {"payload": B64}},
     {"event": "mark", "streamSid": "MZ1", "mark": {"name": "m"}},
     {"event": "clear", "streamSid": "MZ1"}),
    (TelnyxStream, [TELNYX_START],
     {"event": "media", "media": {"payload": B64}},
     {"event": "mark", "mark": {"name": "m"}},
     {"event": "clear"}),
    (PlivoStream, [PLIVO_START],
     {"event": "playAudio", "media": {"contentType": "audio/x-mulaw", "sampleRate": 8000, "payload": B64},
      "streamId": "st1"},
     {"event": "checkpoint", "streamId": "st1", "name": "m"},
     {"event": "clearAudio", "streamId": "st1"}),
]


@pytest.mark.parametrize(("machine", "frames", "media", "mark", "clear"), OUT)
def test_each_carriers_frames_out(machine, frames, media, mark, clear):
    stream = machine()
    for message in frames:
        stream.receive(frame(message))
    assert (stream.codec, stream.rate) == (Codec.MULAW, 8000)
    assert json.loads(stream.media(PAYLOAD)) == media
    assert json.loads(stream.mark("m")) == mark
    assert json.loads(stream.clear()) == clear


def test_vonage_sends_raw_l16_frames_and_notify_and_clear_actions():
    stream = VonageStream()
    assert (stream.codec, stream.rate, stream.frame_bytes) == (Codec.L16, 16000, FRAME_BYTES) == (Codec.L16, 16000, 640)
    assert stream.media(PAYLOAD) == PAYLOAD
    assert json.loads(stream.mark("m")) == {"action": "notify", "payload": {"name": "m"}}
    assert json.loads(stream.clear()) == {"action": "clear"}


BAD = [
    (TwilioStream, ["not json"]),
    (TwilioStream, ["[1, 2]"]),
    (TwilioStream, [json.dumps({"no": "event"})]),
    (TwilioStream, [b"\x00\x01"]),
    (TwilioStream, [json.dumps({"event": "media", "media": {"payload": B64}})]),  # before start
    (TwilioStream, [json.dumps(TWILIO_START), json.dumps(TWILIO_START)]),  # started twice
    (TwilioStream, [json.dumps(TWILIO_START), json.dumps({"event": "media", "media": {"payload": "%%%"}})]),
    (TwilioStream, [json.dumps({**TWILIO_START, "start": {**TWILIO_START["start"],
                                                          "mediaFormat": {"encoding": "audio/ogg"}}})]),
    (TelnyxStream, [json.dumps({**TELNYX_START, "start": {"media_format": {"encoding": "OPUS"}}})]),
    (PlivoStream, [json.dumps({"event": "start", "start": {}})]),  # no streamId
    (VonageStream, [PAYLOAD]),  # audio before websocket:connected
    (VonageStream, [json.dumps({"event": "websocket:connected", "content-type": "audio/ogg"})]),
]


@pytest.mark.parametrize(("machine", "frames"), BAD)
def test_garbage_and_illegal_transitions_are_carrier_errors(machine, frames):
    stream = machine()
    with pytest.raises(CarrierError):
        for message in frames:
            stream.receive(message)


def test_a_stop_ends_the_stream_once_and_nothing_streams_after_it():
    stream = TwilioStream()
    stream.receive(json.dumps(TWILIO_START))
    assert stream.receive(json.dumps({"event": "stop"})) == [HungUp()]
    assert stream.state is StreamState.STOPPED
    assert stream.receive(json.dumps({"event": "stop"})) == []
    with pytest.raises(CarrierError):
        stream.receive(json.dumps({"event": "media", "media": {"payload": B64}}))


def test_the_webhook_answers_point_each_carrier_at_its_stream():
    url = "wss://agent.example/telephony/x/stream?token=1.a&b"
    assert twiml(url) == (
        '<?xml version="1.0" encoding="UTF-8"?><Response><Connect>'
        '<Stream url="wss://agent.example/telephony/x/stream?token=1.a&amp;b"/></Connect></Response>'
    )
    assert 'bidirectionalMode="rtp"' in texml(url) and "token=1.a&amp;b" in texml(url)
    assert 'bidirectional="true"' in plivo_xml(url) and ">wss://agent.example/telephony/x/stream?token=1.a&amp;b<" in plivo_xml(url)
    assert ncco(url) == [{"action": "connect", "endpoint": [
        {"type": "websocket", "uri": url, "content-type": "audio/l16;rate=16000"}]}]
