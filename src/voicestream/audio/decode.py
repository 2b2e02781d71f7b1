"""Decoding any supported format back to float samples (for tests and client checks)."""

import io

import av
import numpy as np

from voicestream.audio.errors import AudioError, RecordingTooLongError, UnsupportedFormatError
from voicestream.audio.factory import ENGINE_SAMPLE_RATE, SUPPORTED_FORMATS
from voicestream.audio.g711 import mulaw_to_float
from voicestream.audio.pcm import FloatArray, pcm16_to_float

_DEMUXERS = {"wav": "wav", "mp3": "mp3", "aac": "mp4", "opus": "ogg", "flac": "flac"}


def decode_audio(
    data: bytes, format: str, sample_rate: int = ENGINE_SAMPLE_RATE
) -> tuple[FloatArray, int]:
    """Mono float32 samples and their rate.

    Headerless formats (`pcm16`, `mulaw`) cannot say their rate, so `sample_rate` is taken
    as given; the others report their own (FFmpeg decodes Opus at 48 kHz, always).
    Decoded lengths are exact except where a streamed container cannot tell the decoder
    what to trim: mp3 starts with LAME's 576-sample delay and aac with 1024 priming
    samples, and both end padded to a whole frame.
    """
    if format == "pcm16":
        return pcm16_to_float(data[: len(data) - len(data) % 2]), sample_rate
    if format == "mulaw":
        return mulaw_to_float(data), sample_rate
    if format not in _DEMUXERS:
        raise UnsupportedFormatError(format, SUPPORTED_FORMATS)
    try:
        return _decode_container(data, _DEMUXERS[format])
    except av.FFmpegError as exc:
        raise AudioError(f"cannot decode this {format} data") from exc


_RECORDING_DEMUXERS = {"webm": "matroska", "ogg": "ogg", "wav": "wav"}


def decode_recording(
    data: bytes, container: str, rate: int, max_seconds: float | None = None
) -> FloatArray:
    """Mono float32 samples at `rate` from a recording in `container` (`webm` or `ogg`, as
    browsers record, or `wav`), whatever codec, channels and rate it holds. Raises
    `AudioError` when the bytes are not such a recording, and `RecordingTooLongError` as
    soon as more than `max_seconds` are decoded: the rest is never decoded, so a small file
    of compressed silence cannot grow into gigabytes of samples."""
    if container not in _RECORDING_DEMUXERS:
        raise UnsupportedFormatError(container, tuple(_RECORDING_DEMUXERS))
    max_samples = None if max_seconds is None else round(max_seconds * rate)
    try:
        return _decode_container(data, _RECORDING_DEMUXERS[container], rate, max_samples)[0]
    except (av.FFmpegError, IndexError) as exc:
        raise AudioError(f"cannot decode this {container} recording") from exc


def _decode_container(
    data: bytes, demuxer: str, output_rate: int | None = None, max_samples: int | None = None
) -> tuple[FloatArray, int]:
    """The first audio stream, mono float, at `output_rate` (None: its own), and the rate;
    decoding stops once it holds more than `max_samples` (at `output_rate`)."""
    with av.open(io.BytesIO(data), mode="r", format=demuxer) as container:
        stream = container.streams.audio[0]
        to_mono_float = av.AudioResampler(format="flt", layout="mono", rate=output_rate)
        frames: list[av.AudioFrame] = []
        decoded = 0
        rate = output_rate or stream.codec_context.sample_rate
        for frame in container.decode(stream):
            rate = output_rate or frame.sample_rate
            for resampled in to_mono_float.resample(frame):
                frames.append(resampled)
                decoded += resampled.samples
            if max_samples is not None and decoded > max_samples:
                raise RecordingTooLongError(max_samples, decoded, rate)
        frames.extend(to_mono_float.resample(None))
    chunks = [np.asarray(frame.to_ndarray(), dtype=np.float32).reshape(-1) for frame in frames]
    return (np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)), rate
