"""Choosing an encoder from the request's `format` and `sample_rate`."""

from voicestream.audio.container import CONTAINER_FORMATS, ContainerEncoder
from voicestream.audio.encoder import StreamEncoder
from voicestream.audio.errors import UnsupportedFormatError, UnsupportedSampleRateError
from voicestream.audio.raw import MulawEncoder, Pcm16Encoder, WavEncoder
from voicestream.protocol.messages import AUDIO_FORMATS, SAMPLE_RATES

SUPPORTED_FORMATS = AUDIO_FORMATS
"""The protocol declares the formats and rates once (`voicestream.protocol.messages`)."""
SUPPORTED_SAMPLE_RATES = SAMPLE_RATES
ENGINE_SAMPLE_RATE = 24000
"""What Kokoro-82M produces, and so what encoders take by default."""

_RAW_ENCODERS: dict[str, type[StreamEncoder]] = {
    "pcm16": Pcm16Encoder,
    "wav": WavEncoder,
    "mulaw": MulawEncoder,
}


def create_encoder(
    format: str,
    sample_rate: int = ENGINE_SAMPLE_RATE,
    input_rate: int = ENGINE_SAMPLE_RATE,
    bitrate: int | None = None,
) -> StreamEncoder:
    """A fresh encoder for one stream.

    `bitrate` (bits per second) applies to the lossy codecs (mp3, aac, opus); it is
    ignored by the others. Raises `UnsupportedFormatError` or `UnsupportedSampleRateError`
    for values outside `SUPPORTED_FORMATS` / `SUPPORTED_SAMPLE_RATES`.
    """
    if format not in SUPPORTED_FORMATS:
        raise UnsupportedFormatError(format, SUPPORTED_FORMATS)
    if sample_rate not in SUPPORTED_SAMPLE_RATES:
        raise UnsupportedSampleRateError(sample_rate, SUPPORTED_SAMPLE_RATES)
    if bitrate is not None and bitrate <= 0:
        raise ValueError(f"bitrate must be a positive number of bits per second, got {bitrate}")
    if format in _RAW_ENCODERS:
        return _RAW_ENCODERS[format](sample_rate, input_rate)
    return ContainerEncoder(CONTAINER_FORMATS[format], sample_rate, input_rate, bitrate)


def encoded_rate(format: str, sample_rate: int) -> int:
    """The rate ``create_encoder(format, sample_rate)`` carries its audio at: the one asked
    for, or a codec's next rate up (opus: 22050 Hz is carried at 24000 Hz)."""
    spec = CONTAINER_FORMATS.get(format)
    return sample_rate if spec is None else spec.encoded_rate(sample_rate)
