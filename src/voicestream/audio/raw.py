"""Formats that need no codec library: raw PCM, streamed WAV and G.711 mu-law."""

from voicestream.audio.encoder import StreamEncoder
from voicestream.audio.g711 import float_to_mulaw
from voicestream.audio.pcm import FloatArray, float_to_pcm16
from voicestream.audio.wav import wav_header


class Pcm16Encoder(StreamEncoder):
    """Raw signed 16-bit little-endian mono, no header (the protocol's default)."""

    format = "pcm16"
    content_type = "audio/pcm"

    def _encode(self, samples: FloatArray) -> bytes:
        return float_to_pcm16(samples).astype("<i2", copy=False).tobytes()

    def _finish(self) -> bytes:
        return b""


class WavEncoder(Pcm16Encoder):
    """pcm16 behind an open-ended WAV header, sent with the first bytes.

    The header carries 0xFFFFFFFF sizes because the length is unknown while streaming;
    `finalize_wav` writes the real ones when the whole stream is kept as a file.
    """

    format = "wav"
    content_type = "audio/wav"

    def __init__(self, sample_rate: int, input_rate: int) -> None:
        super().__init__(sample_rate, input_rate)
        self._header_sent = False

    def _encode(self, samples: FloatArray) -> bytes:
        return self._take_header() + super()._encode(samples)

    def _finish(self) -> bytes:
        return self._take_header()

    def _take_header(self) -> bytes:
        if self._header_sent:
            return b""
        self._header_sent = True
        return wav_header(self.sample_rate)


class MulawEncoder(StreamEncoder):
    """G.711 mu-law, one byte per sample, no header (telephony, usually at 8000 Hz)."""

    format = "mulaw"
    content_type = "audio/basic"

    def _encode(self, samples: FloatArray) -> bytes:
        return float_to_mulaw(samples).tobytes()

    def _finish(self) -> bytes:
        return b""


class Float32Encoder(StreamEncoder):
    """Raw 32-bit float little-endian mono, no header (Cartesia's ``pcm_f32le``).

    Not one of the protocol's formats (`create_encoder` does not offer it): the
    Cartesia-compatible routes build it themselves.
    """

    format = "f32"
    content_type = "audio/pcm"

    def _encode(self, samples: FloatArray) -> bytes:
        return samples.astype("<f4", copy=False).tobytes()

    def _finish(self) -> bytes:
        return b""
