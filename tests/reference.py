"""Durations the tests expect of the reference's sentences, as voicestream speaks them."""

HELLO_SECONDS = 0.995
"""'Hello there.': the reference's 73,200 bytes (1.525 s) less Kokoro's padding, which
voicestream cuts to 20 ms before the first sound and 330 ms after the last (engine/silence.py),
as a new request's first piece, vocoded window by window (rendered whole: 1.006 s; its
last audible window ends 11 ms later)."""
