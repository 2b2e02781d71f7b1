"""Errors the audio layer raises on purpose.

The server maps the two request errors to the protocol's `unsupported_format` and
`unsupported_sample_rate` codes, so their messages are written for people and name what
is allowed.
"""

from collections.abc import Iterable


class AudioError(Exception):
    """Base class: something the audio layer cannot do as asked."""


class UnsupportedFormatError(AudioError, ValueError):
    """An audio format outside `SUPPORTED_FORMATS`."""

    def __init__(self, format: str, supported: Iterable[str]) -> None:
        self.format = format
        self.supported = tuple(supported)
        super().__init__(
            f"unsupported audio format {format!r}; supported formats: {', '.join(self.supported)}"
        )


class UnsupportedSampleRateError(AudioError, ValueError):
    """A sample rate outside `SUPPORTED_SAMPLE_RATES`."""

    def __init__(self, sample_rate: object, supported: Iterable[int]) -> None:
        self.sample_rate = sample_rate
        self.supported = tuple(supported)
        super().__init__(
            f"unsupported sample rate {sample_rate!r}; supported sample rates (Hz): "
            f"{', '.join(str(rate) for rate in self.supported)}"
        )


class RecordingTooLongError(AudioError):
    """A recording longer than allowed. Decoding stopped at the first frame past the limit,
    so `decoded_samples` exceeds `max_samples` by at most one frame."""

    def __init__(self, max_samples: int, decoded_samples: int, rate: int) -> None:
        self.max_samples = max_samples
        self.decoded_samples = decoded_samples
        self.rate = rate
        super().__init__(f"the recording lasts longer than {max_samples / rate:g} s")
