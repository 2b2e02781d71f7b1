"""Compressed formats, encoded and muxed incrementally with PyAV (FFmpeg).

Each encoder owns one FFmpeg muxer writing into an in-memory sink that has no `seek`:
FFmpeg then treats the output as a pipe and streams (no moov/Xing/STREAMINFO rewrites at
the end), and the bytes each `encode` call produced are drained and returned at once.

Codecs with fixed frames (mp3 576/1152, aac 1024, opus 20 ms) get full frames from
PyAV's own frame-size FIFO inside `stream.encode`, which keeps the remainder between
calls and lets only the last frame be short, at `finish`.

Two muxers would hold audio back too long by default, so they are tuned:
- MP4: `frag_keyframe` cuts fragments only at video keyframes, so an audio-only file
  would not emit a single fragment until the end. `frag_duration` cuts one every 200 ms
  instead: the tail of a chunk waits up to that long (plus the codec's lookahead) for
  the next chunk, and the ~100 bytes of moof/mdat headers per fragment cost ~4 kb/s.
- Ogg: pages are flushed every 100 ms instead of every second (~30 bytes per page).

What a pipe cannot carry: the gapless-playback data written by seeking back at the end.
Decoders therefore play LAME's 576-sample delay (mp3) and AAC's 1024 priming samples as
leading silence; Ogg Opus needs no seek for its pre-skip, so opus decodes exactly.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import cast

import av
import numpy as np
from av.audio.stream import AudioStream

from voicestream.audio.encoder import StreamEncoder
from voicestream.audio.errors import AudioError
from voicestream.audio.pcm import FloatArray, float_to_pcm16


@dataclass(frozen=True)
class ContainerFormat:
    """How one wire format maps onto an FFmpeg muxer and encoder."""

    format: str
    content_type: str
    muxer: str
    codec: str
    sample_format: str
    default_bitrate: int | None = None
    muxer_options: Mapping[str, str] = field(default_factory=dict)
    codec_rates: tuple[int, ...] | None = None
    """Rates the codec can encode at, when it cannot take any rate."""

    def encoded_rate(self, requested: int) -> int:
        """The rate to encode at: the requested one, or the next the codec supports.

        Opus only runs at 8/12/16/24/48 kHz, so 22050 Hz is carried at 24000 Hz and
        44100 Hz at 48000 Hz; the decoded duration is the same either way.
        """
        if self.codec_rates is None or requested in self.codec_rates:
            return requested
        return min(rate for rate in self.codec_rates if rate >= requested)


CONTAINER_FORMATS: Mapping[str, ContainerFormat] = {
    spec.format: spec
    for spec in (
        ContainerFormat(
            "mp3",
            "audio/mpeg",
            muxer="mp3",
            codec="libmp3lame",
            sample_format="fltp",
            default_bitrate=48_000,
            # Bare MPEG frames: no ID3 tag in front, so streams can be concatenated.
            muxer_options={"id3v2_version": "0"},
        ),
        ContainerFormat(
            "aac",
            "audio/mp4",
            muxer="mp4",
            codec="aac",
            sample_format="fltp",
            default_bitrate=32_000,
            muxer_options={
                "movflags": "empty_moov+default_base_moof",
                "frag_duration": "200000",
            },
        ),
        ContainerFormat(
            "opus",
            "audio/ogg; codecs=opus",
            muxer="ogg",
            codec="libopus",
            sample_format="flt",
            default_bitrate=32_000,
            muxer_options={"page_duration": "100000"},
            codec_rates=(8000, 12000, 16000, 24000, 48000),
        ),
        ContainerFormat(
            "flac",
            "audio/flac",
            muxer="flac",
            codec="flac",
            sample_format="s16",
            # No 8 KiB of PADDING metadata for later tag edits: nobody edits a stream.
            muxer_options={"metadata_header_padding": "0"},
        ),
    )
}


_DETERMINISTIC = {"fflags": "+bitexact"}
"""Same samples in, same bytes out, however they were chunked: no random Ogg serial
number and no FFmpeg version string in the stream."""


class _ByteSink:
    """A write-only file for FFmpeg; without `seek` it is a pipe, so muxers stream."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def write(self, data: bytes) -> int:
        self._buffer += data
        return len(data)

    def drain(self) -> bytes:
        data = bytes(self._buffer)
        self._buffer.clear()
        return data


class ContainerEncoder(StreamEncoder):
    """One FFmpeg encoder plus muxer, fed chunk by chunk."""

    def __init__(
        self, spec: ContainerFormat, sample_rate: int, input_rate: int, bitrate: int | None
    ) -> None:
        rate = spec.encoded_rate(sample_rate)
        super().__init__(rate, input_rate)
        self.format = spec.format
        self.content_type = spec.content_type
        self._spec = spec
        self._pts = 0
        self._time_base = Fraction(1, rate)
        self._sink = _ByteSink()
        try:
            self._container = av.open(
                self._sink,
                mode="w",
                format=spec.muxer,
                container_options={**_DETERMINISTIC, **spec.muxer_options},
            )
            self._stream = cast(
                AudioStream,
                self._container.add_stream(
                    spec.codec, rate=rate, layout="mono", format=spec.sample_format
                ),
            )
            if spec.default_bitrate is not None:  # lossless codecs have no bitrate to set
                self._stream.bit_rate = bitrate or spec.default_bitrate
            self._container.start_encoding()
        except av.FFmpegError as exc:
            raise AudioError(
                f"cannot start the {spec.format} encoder at {rate} Hz"
                + (f" and {bitrate} b/s" if bitrate else "")
            ) from exc

    def _encode(self, samples: FloatArray) -> bytes:
        if len(samples):
            self._container.mux(self._stream.encode(self._frame(samples)))
        return self._sink.drain()

    def _finish(self) -> bytes:
        self._container.mux(self._stream.encode(None))
        self._container.close()
        return self._sink.drain()

    def _frame(self, samples: FloatArray) -> av.AudioFrame:
        planes: np.ndarray = (
            float_to_pcm16(samples) if self._spec.sample_format == "s16" else samples
        )
        frame = av.AudioFrame.from_ndarray(
            planes.reshape(1, -1), format=self._spec.sample_format, layout="mono"
        )
        frame.sample_rate = self.sample_rate
        frame.time_base = self._time_base
        frame.pts = self._pts
        self._pts += len(samples)
        return frame
