"""voicestream: low-latency streaming speech for AI agents with Kokoro-82M."""
__version__ = "0.1.0"
