"""A piece's audio window by window: the vocoder run on a few hundred milliseconds at a time.

The model's front (text encoder, durations, pitch, the harmonic source) runs once over the
whole piece; the vocoder, nine tenths of the work, then runs on windows of its feature
frames, so the first audio of a long piece costs the front plus one short window instead
of the whole piece (`voicestream.engine.graph` says where the graph is cut). The prosody
stays the whole piece's: durations, pitch and the source's phase come from one front run.

A window is run with `CONTEXT_FRAMES` of features on each side, whose audio is dropped;
neighbouring windows meet between words (`word_seams`) in a `CROSSFADE_SAMPLES` linear
crossfade. The vocoder normalizes its activations over the frames it is given (instance
norm, dynamic quantization), so a window's audio is near the whole run's, not equal to
it; a window of speech alone came out 1.5 dB quieter than the same frames of the whole
run, and seams were heard as commas ("streaming speech, let's"). So each window runs with
the piece's own leading and trailing silence beside it, as much as the whole piece holds
in proportion (`_silence_beside`): then as many words are heard as from the whole piece
(docs/BENCHMARKS.md).

Windows grow: the first is the first window's length of audio from `EDGE_FRAMES` before the
first phoneme (the silent tokens' frames before it are not rendered), each next one as long
as all the audio before it, so each renders in less time than the audio already sent takes
to play (RTF below one half on two cores); the silent frames after the last phoneme are not
rendered either, past `EDGE_FRAMES`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from voicestream.engine import memory
from voicestream.engine.graph import FRAME_SAMPLES, VOCODER_FEATURES, VOCODER_SOURCE, VOCODER_STYLE

if TYPE_CHECKING:
    import onnxruntime as ort

SAMPLE_RATE = 24_000
FEATURE_SAMPLES = FRAME_SAMPLES // 2
"""Samples per vocoder feature frame: two feature frames per predicted frame."""
SOURCE_PER_FEATURE = 60
"""Harmonic-source frames per feature frame (a 5-sample hop); the source has one more in all."""
CONTEXT_FRAMES = 8
"""Feature frames (100 ms) run on each side of a window and dropped: the convolutions' reach."""
EDGE_FRAMES = 12
"""Feature frames (150 ms) kept before the first phoneme and after the last."""
FIRST_WINDOW_S = 0.5
"""The first window's audio (``serve --first-window-ms 500``): with the piece's silence beside
each window, as many words heard as from the whole piece (docs/BENCHMARKS.md)."""
SEAM_REACH_FRAMES = 20
"""How far past a window's planned end (250 ms) a seam between words is looked for."""
CROSSFADE_SAMPLES = 480
"""20 ms at 24 kHz where two windows meet."""


@dataclass(frozen=True)
class Front:
    """What the front computed for one piece: the vocoder's inputs and the token durations."""

    features: np.ndarray
    style: np.ndarray
    source: np.ndarray
    durations: np.ndarray

    @property
    def frames(self) -> int:
        return int(self.features.shape[2])


def silent_edges(tokens: Sequence[int], durations: Sequence[int], silent: frozenset[int]) -> tuple[int, int]:
    """Feature frames of silence at each end of a piece: the tokens before its first phoneme
    and after its last (the pads, punctuation and spaces in ``silent``)."""
    voiced = [i for i, token in enumerate(tokens) if token not in silent]
    if not voiced:
        return 0, 0
    return 2 * int(np.sum(durations[: voiced[0]])), 2 * int(np.sum(durations[voiced[-1] + 1 :]))


def speech_frames(edges: tuple[int, int], frames: int) -> tuple[int, int]:
    """The feature frames worth rendering: from `EDGE_FRAMES` before the first phoneme to
    `EDGE_FRAMES` after the last (``edges``: `silent_edges`)."""
    start = max(0, edges[0] - EDGE_FRAMES)
    stop = min(frames, frames - edges[1] + EDGE_FRAMES)
    return (start, stop) if stop > start else (0, frames)


def word_seams(tokens: Sequence[int], durations: Sequence[int], space: int) -> list[int]:
    """Feature frames between words: the middle of each space token's frames. Windows meet
    there, so no crossfade falls inside a word (seams inside words were measured to blur
    them: "Le chat dort" heard as "Le châneur" with a seam in "dort")."""
    ends = np.cumsum(durations)
    return [int(ends[i] - durations[i] + ends[i]) for i, token in enumerate(tokens) if token == space]


def plan_windows(start: int, stop: int, first_frames: int, seams: Sequence[int] = ()) -> list[tuple[int, int]]:
    """Growing windows over feature frames [start, stop): the first at least `first_frames`
    long, each next at least as long as all before it, each ending at the first of ``seams``
    from there (or there, when none comes within `SEAM_REACH_FRAMES`); a remainder shorter
    than `first_frames` joins the last window."""
    windows: list[tuple[int, int]] = []
    at = start
    while at < stop:
        target = at + max(first_frames, at - start)
        end = next((seam for seam in seams if target <= seam < target + SEAM_REACH_FRAMES), target)
        if stop - end < first_frames:
            end = stop
        windows.append((at, end))
        at = end
    return windows


class SplitModel:
    """The front and the vocoder as two ONNX Runtime sessions of one thread count, their runs
    counted by their engine's idle release."""

    def __init__(self, front: ort.InferenceSession, vocoder: ort.InferenceSession, release: memory.IdleRelease) -> None:
        self._front = front
        self._vocoder = vocoder
        self._release = release
        self._front_outputs = [output.name for output in front.get_outputs()]

    @property
    def sessions(self) -> tuple[ort.InferenceSession, ort.InferenceSession]:
        """The front's session and the vocoder's."""
        return self._front, self._vocoder

    def front(self, feed: dict[str, np.ndarray]) -> Front:
        values = dict(zip(self._front_outputs, memory.run(self._front, self._front_outputs, feed, self._release), strict=True))
        durations = next(value for name, value in values.items() if name not in (VOCODER_FEATURES, VOCODER_STYLE, VOCODER_SOURCE))
        return Front(values[VOCODER_FEATURES], values[VOCODER_STYLE], values[VOCODER_SOURCE], np.asarray(durations).ravel())

    def vocode(self, front: Front, start: int, stop: int, edges: tuple[int, int] = (0, 0)) -> np.ndarray:
        """The audio of feature frames [start, stop), with `CONTEXT_FRAMES` of context on each
        side run and dropped (none beyond the piece's own frames), and as much of the piece's
        own silence (``edges``) beside them as the whole piece has in proportion: the vocoder
        normalizes over the frames it is given, and windows of speech alone came out 1.5 dB
        quieter than the whole run (with the silence, 0.5 dB: docs/BENCHMARKS.md)."""
        low, high = max(0, start - CONTEXT_FRAMES), min(front.frames, stop + CONTEXT_FRAMES)
        lead, trail = _silence_beside(front.frames, edges, low, high)
        audio = self._run(front, [(0, lead), (low, high), (front.frames - trail, front.frames)])
        offset = (lead + start - low) * FEATURE_SAMPLES
        return audio[offset : offset + (stop - start) * FEATURE_SAMPLES]

    def whole(self, front: Front) -> np.ndarray:
        """The whole piece's audio: the whole model's, bit for bit."""
        return self._run(front, [(0, front.frames)])

    def windows(
        self,
        front: Front,
        edges: tuple[int, int],
        seams: Sequence[int] = (),
        first_window_s: float = FIRST_WINDOW_S,
        using: Callable[[], SplitModel] | None = None,
    ) -> Iterator[tuple[np.ndarray, bool]]:
        """The speech frames' audio window by window (`plan_windows`), each with whether it is
        the last: each window renders past its end and the next before its start as far as
        the `CROSSFADE_SAMPLES` crossfade centred on the seam needs. The parts join end to
        end. ``using``, asked before each window, names the model to vocode it with (another
        thread count's: the front's outputs are plain arrays, any `SplitModel` vocodes them);
        else this one."""
        start, stop = speech_frames(edges, front.frames)
        planned = plan_windows(start, stop, max(1, round(first_window_s * SAMPLE_RATE / FEATURE_SAMPLES)), seams)
        half = CROSSFADE_SAMPLES // 2
        reach = -(-half // FEATURE_SAMPLES)  # frames past the seam the crossfade needs
        fade_in = np.linspace(0.0, 1.0, 2 * half, dtype=np.float32)
        held: np.ndarray | None = None  # the window before's audio over [seam - half, seam + half)
        for index, (low, high) in enumerate(planned):
            last = index == len(planned) - 1
            begin, end = (low if held is None else low - reach), (high if last else high + reach)
            audio = (using() if using else self).vocode(front, begin, end, edges)
            origin = begin * FEATURE_SAMPLES  # the sample of the piece that audio[0] is
            head = low * FEATURE_SAMPLES - (0 if held is None else half) - origin
            tail = high * FEATURE_SAMPLES - (0 if last else half) - origin
            part = audio[head:tail].copy()
            if held is not None:
                part[: 2 * half] = held * (1.0 - fade_in) + part[: 2 * half] * fade_in
            if not last:
                held = audio[tail : tail + 2 * half]
            yield part, last

    def _run(self, front: Front, spans: Sequence[tuple[int, int]]) -> np.ndarray:
        """The vocoder on the feature frames of ``spans``, joined (empty spans skipped)."""
        spans = [(low, high) for low, high in spans if high > low]
        features = np.concatenate([front.features[:, :, low:high] for low, high in spans], axis=2)
        source = np.concatenate(
            [front.source[:, :, low * SOURCE_PER_FEATURE : high * SOURCE_PER_FEATURE] for low, high in spans]
            + [front.source[:, :, spans[-1][1] * SOURCE_PER_FEATURE :][:, :, :1]],  # the source's one extra frame
            axis=2,
        )
        feed = {VOCODER_FEATURES: features, VOCODER_STYLE: front.style, VOCODER_SOURCE: source}
        return np.asarray(memory.run(self._vocoder, None, feed, self._release)[0], dtype=np.float32).ravel()


def _silence_beside(frames: int, edges: tuple[int, int], low: int, high: int) -> tuple[int, int]:
    """Frames of the piece's leading and trailing silence to run beside [low, high) so that
    the run holds the whole piece's share of silence."""
    lead, trail = edges
    share = (lead + trail) / frames if frames else 0.0
    present = max(0, min(high, lead) - low) + max(0, high - max(low, frames - trail))
    if share >= 1.0 or present >= share * (high - low):
        return 0, 0
    wanted = int(np.ceil((share * (high - low) - present) / (1.0 - share)))
    before = min(max(0, min(lead, low)), wanted // 2 + wanted % 2)  # silence not already in the run
    after = min(max(0, min(trail, frames - high)), wanted - before)
    return before, after
