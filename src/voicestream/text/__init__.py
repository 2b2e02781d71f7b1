"""Pure text processing before speech synthesis: sentence chunking and normalization."""

from voicestream.text.chunker import IncrementalSentenceChunker
from voicestream.text.normalize import normalize_for_speech

__all__ = ["IncrementalSentenceChunker", "normalize_for_speech"]
