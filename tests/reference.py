"""Durations the tests expect of the reference's sentences, as voicestream speaks them."""

HELLO_SECONDS = 1.006
"""'Hello there.': the reference's 73,200 bytes (1.525 s) less Kokoro's padding, which
voicestream cuts to 20 ms before the first sound and 330 ms after the last (engine/silence.py)."""
