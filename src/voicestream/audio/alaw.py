"""The G.711 A-law stream encoder (Deepgram's ``encoding=alaw``).

Not one of the protocol's formats (`create_encoder` does not offer it): the Deepgram-
compatible routes build it themselves, as the Cartesia ones build `Float32Encoder`.
"""

from voicestream.audio.encoder import StreamEncoder
from voicestream.audio.g711 import float_to_alaw
from voicestream.audio.pcm import FloatArray


class AlawEncoder(StreamEncoder):
    """G.711 A-law, one byte per sample, no header."""

    format = "alaw"
    content_type = "audio/x-alaw-basic"

    def _encode(self, samples: FloatArray) -> bytes:
        return float_to_alaw(samples).tobytes()

    def _finish(self) -> bytes:
        return b""
