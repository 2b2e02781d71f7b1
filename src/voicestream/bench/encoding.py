"""``voicestream bench encoding``: what each wire format costs in bytes, and whether it is heard.

The same clips go out as raw PCM, MP3 48 kb/s, AAC 32 kb/s (fragmented MP4, as the server
streams it) and Opus: bytes raw and once base64'd (the AgentCore hop carries JSON only),
the measured bit rate, and the word error rate of each through Whisper tiny.en with both
sides normalized by Whisper's English text normalizer, so that a difference in quality
would show as a difference in words heard.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import numpy as np

from voicestream.audio import create_encoder, decode_audio
from voicestream.bench.asr import transcribe, word_errors
from voicestream.bench.report import Chart, Report, Table, machine_context, progress
from voicestream.bench.texts import ENCODING_CLIPS
from voicestream.engine import KokoroEngine, offline


@dataclass(frozen=True)
class WireFormat:
    label: str
    format: str
    bitrate: int | None
    reference: tuple[int, int, float] | None
    """The reference's 24 clips: bytes raw, bytes base64, kb/s."""


WIRE_FORMATS = (
    WireFormat("raw PCM (s16le, 24 kHz)", "pcm16", None, (2_396_400, 3_195_200, 384.0)),
    WireFormat("MP3 48 kb/s", "mp3", 48_000, (308_304, 411_072, 49.5)),
    WireFormat("AAC 32 kb/s (fMP4)", "aac", 32_000, (258_039, 344_084, 41.6)),
    WireFormat("Opus 32 kb/s (Ogg)", "opus", 32_000, None),
)


@dataclass
class _Totals:
    raw_bytes: int = 0
    base64_bytes: int = 0
    edits: int = 0
    words: int = 0


def encode_clip(samples: np.ndarray, wire: WireFormat, rate: int) -> bytes:
    encoder = create_encoder(wire.format, sample_rate=rate, input_rate=rate, bitrate=wire.bitrate)
    return encoder.encode(samples) + encoder.finish()


def measure_encoding(engine: KokoroEngine, clips: tuple[str, ...] = ENCODING_CLIPS, voice: str = "af_heart") -> Report:
    """Synthesize every clip, then encode, base64, decode and transcribe it in each format."""
    context = machine_context()
    totals = {wire.label: _Totals() for wire in WIRE_FORMATS}
    audio_s = 0.0
    with progress("bench encoding", len(clips) * (1 + len(WIRE_FORMATS))) as advance:
        for text in clips:
            samples = offline.synthesize(engine, text, voice)
            audio_s += samples.size / engine.sample_rate
            advance()
            for wire in WIRE_FORMATS:
                data = encode_clip(samples, wire, engine.sample_rate)
                decoded, rate = decode_audio(data, wire.format, engine.sample_rate)
                edits, words = word_errors(text, transcribe(decoded, rate))
                total = totals[wire.label]
                total.raw_bytes += len(data)
                total.base64_bytes += len(base64.b64encode(data))
                total.edits, total.words = total.edits + edits, total.words + words
                advance()
    table = Table(
        f"{len(clips)} clips ({audio_s:.1f} s of speech) in each wire format",
        ["format", "bytes", "base64 bytes", "kb/s", "WER %", "reference bytes", "reference base64", "reference kb/s"],
    )
    for wire in WIRE_FORMATS:
        total = totals[wire.label]
        reference = wire.reference or (None, None, None)
        table.add(
            wire.label, total.raw_bytes, total.base64_bytes, total.raw_bytes * 8 / audio_s / 1000,
            100 * total.edits / max(total.words, 1), *reference,
        )
    pcm = totals[WIRE_FORMATS[0].label]
    smallest = min(WIRE_FORMATS, key=lambda wire: totals[wire.label].raw_bytes)
    table.note = (
        f"base64 adds {100 * (pcm.base64_bytes / pcm.raw_bytes - 1):.1f} % to every format; "
        f"{smallest.label} is {pcm.raw_bytes / totals[smallest.label].raw_bytes:.1f}x smaller than raw PCM"
    )
    labels: list[str | int | float] = [wire.format for wire in WIRE_FORMATS]
    charts = [
        Chart(
            "Bytes for the clips, base64", labels,
            {"voicestream": [totals[w.label].base64_bytes / 1000 for w in WIRE_FORMATS],
             "reference": [w.reference[1] / 1000 if w.reference else None for w in WIRE_FORMATS]},
            "kB", log_y=True,
        ),
        Chart("Word error rate, Whisper tiny.en", labels,
              {"voicestream": [100 * totals[w.label].edits / max(totals[w.label].words, 1) for w in WIRE_FORMATS]}, "%"),
    ]
    return Report(
        "encoding", [table], charts,
        context={**context, "clips": len(clips), "audio_s": round(audio_s, 3), "voice": voice,
                 "asr": "faster-whisper tiny.en int8, whisper-normalizer EnglishTextNormalizer"},
    )
