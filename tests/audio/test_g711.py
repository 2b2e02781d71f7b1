"""G.711 mu-law and A-law, checked against FFmpeg's codecs (through PyAV) over every int16
value and every code.

FFmpeg's decoders are G.711's levels, and ours match them to the bit. Its encoders are
not G.711's: they put each decision value halfway between two levels on a 14-bit grid,
where G.711 puts it at the edge of the step each level is the centre of (a segment's
edge, for instance). So encoding is checked against G.711's decision values, derived here
from FFmpeg's levels alone, and against FFmpeg's encoders everywhere but those values.
"""

from collections.abc import Callable

import av
import numpy as np
import numpy.typing as npt
import pytest

from voicestream.audio import (
    alaw_to_float,
    float_to_alaw,
    float_to_mulaw,
    float_to_pcm16,
    mulaw_to_float,
    pcm16_to_float,
)

ALL_INT16 = np.arange(-32768, 32768, dtype=np.int32).astype(np.int16)
ALL_CODES = bytes(range(256))

Encode = Callable[[npt.ArrayLike], npt.NDArray[np.uint8]]
Decode = Callable[[bytes], npt.NDArray[np.float32]]
LAWS = [
    pytest.param("pcm_mulaw", float_to_mulaw, mulaw_to_float, id="mulaw"),
    pytest.param("pcm_alaw", float_to_alaw, alaw_to_float, id="alaw"),
]


def ffmpeg_decode(codec: str, codes: bytes) -> npt.NDArray[np.int16]:
    decoder = av.CodecContext.create(codec, "r")
    decoder.sample_rate, decoder.layout = 8000, "mono"
    return np.concatenate(
        [frame.to_ndarray().ravel() for frame in decoder.decode(av.Packet(codes))]
    )


def ffmpeg_encode(codec: str, pcm: npt.NDArray[np.int16]) -> npt.NDArray[np.uint8]:
    encoder = av.CodecContext.create(codec, "w")
    encoder.sample_rate, encoder.layout, encoder.format = 8000, "mono", "s16"
    frame = av.AudioFrame.from_ndarray(pcm[None], format="s16", layout="mono")
    frame.sample_rate = 8000
    return np.frombuffer(b"".join(bytes(packet) for packet in encoder.encode(frame)), np.uint8)


def g711_reference(codec: str) -> npt.NDArray[np.uint8]:
    """The code of every int16 value by G.711's rule, from FFmpeg's levels alone.

    The intervals of the positive codes' levels tile the line, each level at the centre
    of its own (the lowest one's too: mu-law's zero reaches below 0), and a value on a
    decision value takes the level above it. Negative values take the same intervals
    mirrored, a value on an edge again the level above it: -x - 1 (the ones' complement)
    is the magnitude that lands in a positive interval.
    """
    levels = ffmpeg_decode(codec, ALL_CODES).astype(np.int64)
    positive = sorted((int(levels[code]), code) for code in range(0x80, 0x100))
    ascending = [level for level, _ in positive]
    edges = [ascending[0] - (ascending[1] - ascending[0]) // 2]
    for level in ascending[:-1]:
        edges.append(2 * level - edges[-1])
    codes = np.array([code for _, code in positive])
    value = ALL_INT16.astype(np.int64)
    magnitude = np.where(value < 0, -value - 1, value)
    picked = codes[np.searchsorted(np.array(edges[1:]), magnitude, side="right")]
    return np.asarray(np.where(value < 0, picked & 0x7F, picked), dtype=np.uint8)


@pytest.mark.parametrize(("codec", "encode", "decode"), LAWS)
def test_decoding_matches_ffmpeg_for_every_code(codec: str, encode: Encode, decode: Decode) -> None:
    assert np.array_equal(float_to_pcm16(decode(ALL_CODES)), ffmpeg_decode(codec, ALL_CODES))


@pytest.mark.parametrize(("codec", "encode", "decode"), LAWS)
def test_encoding_takes_g711s_decision_values_for_every_int16(
    codec: str, encode: Encode, decode: Decode
) -> None:
    ours = encode(pcm16_to_float(ALL_INT16.tobytes()))
    assert np.array_equal(ours, g711_reference(codec))


@pytest.mark.parametrize(("codec", "encode", "decode"), LAWS)
def test_encoding_matches_ffmpeg_but_where_it_moves_a_decision_value(
    codec: str, encode: Encode, decode: Decode
) -> None:
    """Where the two differ (964 of the 65,536 values for each law, with the FFmpeg that
    PyAV 19 bundles), the value lies between the two levels they pick, and those are
    neighbours."""
    ours = encode(pcm16_to_float(ALL_INT16.tobytes()))
    theirs = ffmpeg_encode(codec, ALL_INT16)
    differ = ours != theirs
    assert 0 < differ.mean() < 0.02
    levels = ffmpeg_decode(codec, ALL_CODES).astype(np.int64)
    value, our_level, their_level = ALL_INT16[differ], levels[ours[differ]], levels[theirs[differ]]
    assert np.all(
        (np.minimum(our_level, their_level) <= value)
        & (value <= np.maximum(our_level, their_level))
    )
    rank = np.unique(levels)
    assert np.all(
        np.abs(np.searchsorted(rank, our_level) - np.searchsorted(rank, their_level)) == 1
    )


@pytest.mark.parametrize(("codec", "encode", "decode"), LAWS)
def test_every_level_ffmpeg_decodes_encodes_back_to_its_code(
    codec: str, encode: Encode, decode: Decode
) -> None:
    """mu-law's negative zero (0x7F) is the one exception: it decodes to 0, a positive zero."""
    codes = np.frombuffer(ALL_CODES, np.uint8)
    expected = np.where(codes == 0x7F, 0xFF, codes) if codec == "pcm_mulaw" else codes
    assert np.array_equal(encode(ffmpeg_decode(codec, ALL_CODES) / 32768), expected)


@pytest.mark.parametrize(("codec", "encode", "decode"), LAWS)
def test_a_sine_ffmpeg_decodes_is_within_half_of_the_coarsest_step(
    codec: str, encode: Encode, decode: Decode
) -> None:
    sine = (0.9 * np.sin(np.arange(8000) * 2 * np.pi * 440 / 8000)).astype(np.float32)
    for decoded in (
        ffmpeg_decode(codec, encode(sine).tobytes()) / 32768,
        decode(encode(sine).tobytes()),
    ):
        assert np.abs(decoded - sine).max() <= 512 / 32768  # the top segment's step is 1024


@pytest.mark.parametrize(
    ("encode", "expected"),
    [
        (float_to_mulaw, [0xFF, 0x80, 0x00, 0x80, 0x00]),
        (float_to_alaw, [0xD5, 0xAA, 0x2A, 0xAA, 0x2A]),
    ],
)
def test_silence_full_scale_and_clipping(encode: Encode, expected: list[int]) -> None:
    assert encode(np.array([0.0, 1.0, -1.0, 1.7, -1.7])).tolist() == expected
