"""Audio for the wire: streaming encoders, resampling and WAV headers.

Pure: no sessions, no network. The engine's float32 chunks go in, the bytes each
format's client expects come out, as soon as the codec has them.
"""

from voicestream.audio.audible import FirstSound, first_audible_sample, heard_at_s
from voicestream.audio.decode import decode_audio, decode_recording
from voicestream.audio.encoder import StreamEncoder
from voicestream.audio.errors import (
    AudioError,
    RecordingTooLongError,
    UnsupportedFormatError,
    UnsupportedSampleRateError,
)
from voicestream.audio.factory import (
    ENGINE_SAMPLE_RATE,
    SUPPORTED_FORMATS,
    SUPPORTED_SAMPLE_RATES,
    create_encoder,
    encoded_rate,
)
from voicestream.audio.g711 import alaw_to_float, float_to_alaw, float_to_mulaw, mulaw_to_float
from voicestream.audio.pcm import float_to_pcm16, pcm16_to_float
from voicestream.audio.raw import Float32Encoder
from voicestream.audio.resample import StreamResampler, resample
from voicestream.audio.wav import finalize_wav, wav_header

__all__ = [
    "ENGINE_SAMPLE_RATE",
    "SUPPORTED_FORMATS",
    "SUPPORTED_SAMPLE_RATES",
    "AudioError",
    "FirstSound",
    "Float32Encoder",
    "RecordingTooLongError",
    "StreamEncoder",
    "StreamResampler",
    "UnsupportedFormatError",
    "UnsupportedSampleRateError",
    "alaw_to_float",
    "create_encoder",
    "decode_audio",
    "decode_recording",
    "encoded_rate",
    "finalize_wav",
    "first_audible_sample",
    "float_to_alaw",
    "float_to_mulaw",
    "float_to_pcm16",
    "heard_at_s",
    "mulaw_to_float",
    "pcm16_to_float",
    "resample",
    "wav_header",
]
