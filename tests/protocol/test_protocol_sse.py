"""Server-Sent Events: our encoding, and the WHATWG decoding of any conformant stream."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicestream.protocol import (
    SSEDecoder,
    SSEEvent,
    SynthesisComplete,
    TextDelta,
    encode_sse,
    parse_agent_event,
)


def decode_all(*chunks: bytes) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    return events + decoder.flush()


def datas(events: list[SSEEvent]) -> list[str]:
    return [event.data for event in events]


# --- encoding ---------------------------------------------------------------------------------


def test_encode_sse_writes_one_data_line_and_a_blank_line() -> None:
    assert encode_sse({"type": "audio", "seq": 0, "data": "AAA="}) == (
        b'data: {"type":"audio","seq":0,"data":"AAA="}\n\n'
    )
    event = TextDelta(request_id="a", t_ms=1.5, seq=2, text="line one\nline two\r\n\u00e9\u2028")
    encoded = encode_sse(event)
    assert encoded.count(b"\n") == 2 and b"\r" not in encoded
    assert "\u00e9".encode() in encoded
    (decoded,) = decode_all(encoded)
    assert parse_agent_event(decoded.data) == event
    assert decoded.json()["text"] == "line one\nline two\r\n\u00e9\u2028"


def test_encode_sse_leaves_out_unset_optional_fields_of_models() -> None:
    complete = SynthesisComplete(request_id="r", audio_bytes=2, total_duration_s=0.5, elapsed_s=0.1)
    assert b"first_audio_ms" not in encode_sse(complete)


# --- decoding: the examples of the WHATWG specification ------------------------------------------


def test_multi_line_data_is_joined_with_newlines() -> None:
    events = decode_all(b"data: YHOO\ndata: +2\ndata: 10\n\n")
    assert events == [SSEEvent(data="YHOO\n+2\n10")]


def test_comments_ids_and_the_space_after_the_colon() -> None:
    stream = (
        b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\n"
        b"data:  third event\n\n"
    )
    assert decode_all(stream) == [
        SSEEvent(data="first event", id="1"),
        SSEEvent(data="second event", id=""),
        SSEEvent(data=" third event", id=""),
    ]


def test_empty_data_lines_and_a_final_line_cut_off() -> None:
    assert datas(decode_all(b"data\n\ndata\ndata\n\ndata:")) == ["", "\n"]


def test_with_and_without_the_space() -> None:
    assert datas(decode_all(b"data:test\n\ndata: test\n\n")) == ["test", "test"]


# --- decoding: fields and line endings -------------------------------------------------------


def test_event_id_and_retry_fields() -> None:
    decoder = SSEDecoder()
    events = decoder.feed(b"event: ping\nid: 42\nretry: 1500\ndata: x\n\ndata: y\n\n")
    assert events == [
        SSEEvent(data="x", event="ping", id="42", retry=1500),
        SSEEvent(data="y", event="message", id="42", retry=None),
    ]
    assert decoder.reconnection_time_ms == 1500


def test_bad_retry_id_with_nul_and_unknown_fields_are_ignored() -> None:
    decoder = SSEDecoder()
    stream = b"id: 1\n\nretry: 1.5\nretry: -3\nretry: \xd9\xa3\nid: a\x00b\nfoo: bar\ndata: x\n\n"
    assert decoder.feed(stream) == [SSEEvent(data="x", id="1")]
    assert decoder.reconnection_time_ms is None


def test_blocks_without_data_dispatch_nothing_but_reset_the_event_type() -> None:
    assert decode_all(b"event: a\n\ndata: x\n\nevent: b\nretry: 5\n\n") == [SSEEvent(data="x")]


def test_line_without_colon_is_a_field_with_an_empty_value() -> None:
    assert decode_all(b"data\nevent\n\n") == [SSEEvent(data="", event="message")]


@pytest.mark.parametrize("ending", [b"\n", b"\r", b"\r\n"])
def test_every_line_ending(ending: bytes) -> None:
    stream = ending.join([b"data: a", b"data: b", b"", b": c", b"data: d", b"", b""])
    assert datas(decode_all(stream)) == ["a\nb", "d"]


def test_cr_at_a_chunk_end_then_lf_is_one_line_end() -> None:
    assert datas(decode_all(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n")) == ["a\nb"]


def test_cr_cr_dispatches_at_once_without_waiting_for_the_next_chunk() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r\r") == [SSEEvent(data="a")]
    assert decoder.feed(b"\ndata: b\n\n") == [SSEEvent(data="b")]


def test_multi_byte_characters_split_across_chunks() -> None:
    stream = "data: caf\u00e9 \u20ac \U0001f600 \u65e5\u672c\n\n".encode()
    for cut in range(len(stream) + 1):
        for second in range(cut, len(stream) + 1):
            events = decode_all(stream[:cut], stream[cut:second], stream[second:])
            assert datas(events) == ["caf\u00e9 \u20ac \U0001f600 \u65e5\u672c"], (cut, second)


def test_invalid_utf8_becomes_replacement_characters() -> None:
    assert datas(decode_all(b"data: a\xffb\n\n")) == ["a\ufffdb"]


def test_a_leading_byte_order_mark_is_dropped_once() -> None:
    bom = "\ufeff".encode()
    assert decode_all(bom[:1], bom[1:] + b"data: a\n\n") == [SSEEvent(data="a")]
    assert datas(decode_all(bom + b"data: a\n\n" + bom + b"data: b\n\n")) == ["a"]


def test_flush_dispatches_an_unclosed_event_with_complete_lines_only() -> None:
    assert decode_all(b"data: a\n\ndata: b\n") == [SSEEvent(data="a"), SSEEvent(data="b")]
    assert decode_all(b"data: a\n\ndata: b\ndata: cut off") == [SSEEvent(data="a")]
    assert decode_all(b"data: a\r") == [SSEEvent(data="a")]


def test_flush_starts_a_new_stream() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"id: 9\nretry: 7\ndata: x\n\ndata: pending")
    assert decoder.flush() == []
    assert decoder.feed("\ufeffdata: y\n\n".encode()) == [SSEEvent(data="y")]
    assert decoder.reconnection_time_ms is None


def test_long_lines_in_small_chunks() -> None:
    payload = "A" * 200_000
    stream = f"data: {payload}\n\n".encode()
    chunks = [stream[i : i + 1000] for i in range(0, len(stream), 1000)]
    assert datas(decode_all(*chunks)) == [payload]


def test_event_json_helper() -> None:
    assert SSEEvent(data='{"type":"agent_end","t_ms":3}').json() == {"type": "agent_end", "t_ms": 3}


# --- property: any split of any stream gives the same, expected events ---------------------------

line_text = st.text(
    alphabet=st.characters(exclude_characters="\r\n", exclude_categories=["Cs"]), max_size=20
)


@dataclass
class Block:
    """One event block as a server would write it, with the event a reader must see."""

    comments: list[str]
    event: str | None
    event_id: str | None
    retry: int | None
    data_lines: list[str]


blocks = st.builds(
    Block,
    comments=st.lists(line_text, max_size=2),
    event=st.none() | line_text,
    event_id=st.none() | line_text.filter(lambda s: "\0" not in s),
    retry=st.none() | st.integers(0, 10**6),
    data_lines=st.lists(line_text, min_size=1, max_size=4),
)


@st.composite
def event_streams(draw: st.DrawFn) -> tuple[bytes, list[SSEEvent]]:
    """A random stream (line endings, spacing, comments, BOM) and the events it means."""
    lines: list[str] = []
    expected: list[SSEEvent] = []
    last_id = ""

    def field(name: str, value: str) -> str:
        tight = draw(st.booleans()) and not value.startswith(" ")
        return f"{name}:{value}" if tight else f"{name}: {value}"

    for block in draw(st.lists(blocks, max_size=6)):
        fields = [":" + comment for comment in block.comments]
        if block.event is not None:
            fields.append(field("event", block.event))
        if block.event_id is not None:
            fields.append(field("id", block.event_id))
            last_id = block.event_id
        if block.retry is not None:
            fields.append(field("retry", str(block.retry)))
        others = draw(st.permutations(fields))
        data_fields = [field("data", line) for line in block.data_lines]
        # Data lines keep their order; the other fields may come before, between or after.
        for take_data in draw(st.permutations([True] * len(data_fields) + [False] * len(others))):
            lines.append(data_fields.pop(0) if take_data else others.pop())
        lines.append("")
        expected.append(
            SSEEvent(
                data="\n".join(block.data_lines),
                event=block.event or "message",
                id=last_id,
                retry=block.retry,
            )
        )
    text = "\ufeff" if draw(st.booleans()) else ""
    ending = ""
    for line in lines:
        # After a CR, an empty line ended by LF would read as one CRLF: not what was meant.
        endings = ["\r", "\r\n"] if ending == "\r" and not line else ["\n", "\r", "\r\n"]
        ending = draw(st.sampled_from(endings))
        text += line + ending
    return text.encode("utf-8"), expected


@settings(max_examples=300, deadline=None)
@given(stream=event_streams(), data=st.data())
def test_every_split_of_a_stream_gives_the_same_events(
    stream: tuple[bytes, list[SSEEvent]], data: st.DataObject
) -> None:
    raw, expected = stream
    assert decode_all(raw) == expected
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=12)))
    chunks = [raw[start:end] for start, end in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    assert decode_all(*chunks) == expected
    assert decode_all(*(raw[i : i + 1] for i in range(len(raw)))) == expected
