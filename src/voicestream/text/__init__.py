"""Pure text processing before speech synthesis: sentence chunking and normalization."""

from voicestream.text.chunker import IncrementalSentenceChunker
from voicestream.text.normalize import normalize_for_speech
from voicestream.text.schedule import SENTENCES, STREAMED, STREAMED_SENTENCES, ChunkSchedule

__all__ = [
    "SENTENCES", "STREAMED", "STREAMED_SENTENCES", "ChunkSchedule", "IncrementalSentenceChunker",
    "normalize_for_speech",
]
