"""RIFF/WAVE headers for PCM, streamed and finished.

A streamed WAV must start before its length is known. Like FFmpeg writing to a pipe, we
put 0xFFFFFFFF in both size fields; players and demuxers then read the data chunk until
the stream ends. A file (`stream: false`) gets the real sizes through `finalize_wav`.
"""

import struct

from voicestream.audio.errors import AudioError

WAV_HEADER_SIZE = 44
UNKNOWN_SIZE = 0xFFFFFFFF

_WAVE_FORMAT_PCM = 1
_RIFF_SIZE_OFFSET = 4
_DATA_SIZE_OFFSET = 40


def wav_header(
    sample_rate: int, channels: int = 1, bits: int = 16, data_bytes: int | None = None
) -> bytes:
    """A 44-byte PCM WAV header; `data_bytes=None` makes it open-ended (for streaming)."""
    block_align = channels * bits // 8
    if data_bytes is None:
        riff_size = data_size = UNKNOWN_SIZE
    else:
        data_size = data_bytes
        riff_size = WAV_HEADER_SIZE - 8 + data_bytes
    return (
        struct.pack("<4sI4s", b"RIFF", riff_size, b"WAVE")
        + struct.pack(
            "<4sIHHIIHH",
            b"fmt ",
            16,
            _WAVE_FORMAT_PCM,
            channels,
            sample_rate,
            sample_rate * block_align,
            block_align,
            bits,
        )
        + struct.pack("<4sI", b"data", data_size)
    )


def finalize_wav(data: bytes) -> bytes:
    """Turn a complete streamed WAV (our 44-byte header + PCM) into one with exact sizes."""
    if len(data) < WAV_HEADER_SIZE or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise AudioError("not a WAV stream: it does not start with a RIFF/WAVE header")
    if data[36:40] != b"data":
        raise AudioError("not a 44-byte-header WAV stream: no data chunk at byte 36")
    data_size = len(data) - WAV_HEADER_SIZE
    finished = bytearray(data)
    struct.pack_into("<I", finished, _RIFF_SIZE_OFFSET, WAV_HEADER_SIZE - 8 + data_size)
    struct.pack_into("<I", finished, _DATA_SIZE_OFFSET, data_size)
    return bytes(finished)
