"""A whole text spoken outside the server, on the engine's one way to synthesize
(`KokoroEngine.plan`, then `KokoroEngine.render_parts` for each piece): for the CLI, the
benches and the tests.

The server schedules pieces itself, against every listener's slack
(`voicestream.speech.scheduler`); nothing here serves a listener. Each function gives the
audio the server gives a new listener for the same text, bit for bit: the same plan, the
same pieces, the same renders.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from voicestream.catalog import DEFAULT_VOICE
from voicestream.engine.alignment import offset_words
from voicestream.engine.kokoro import KokoroEngine, Piece, RenderedPiece


def render_whole(engine: KokoroEngine, piece: Piece, voice: str, speed: float, threads: int = 1) -> RenderedPiece:
    """One piece's audio in one array (blocking), its parts joined, with its words timed from
    the start of that audio (none for a piece planned without words). `threads` above one
    runs it on the many-threaded session (on the CPU)."""
    parts = list(engine.render_parts(piece, voice, speed, threads))
    if len(parts) == 1:
        return RenderedPiece(parts[0].audio, parts[0].words)
    return RenderedPiece(np.concatenate([part.audio for part in parts]), [w for part in parts for w in part.words])


def stream(
    engine: KokoroEngine, text: str, voice: str = DEFAULT_VOICE, speed: float = 1.0, threads: int = 1,
    language: str | None = None, cut_first_clause: bool = True, words: bool = False,
) -> Iterator[RenderedPiece]:
    """``text`` piece by piece (blocking), one run at a time on `threads` threads; ``language``
    overrides the voice's. With `words`, each piece's words are timed from the start of the
    request's audio (the pieces before it added up); the audio is the same without."""
    engine.check(text, voice, speed, language)
    elapsed = 0
    for piece in engine.plan(text, engine.language_for(voice, language), cut_first_clause, words):
        rendered = render_whole(engine, piece, voice, speed, threads)
        yield RenderedPiece(rendered.audio, offset_words(rendered.words, elapsed / engine.sample_rate))
        elapsed += rendered.audio.size


def stream_parallel(
    engine: KokoroEngine, text: str, voice: str = DEFAULT_VOICE, speed: float = 1.0,
    progress: Callable[[int], None] | None = None, language: str | None = None, workers: int | None = None,
) -> Iterator[np.ndarray]:
    """The audio of ``text`` piece by piece (blocking), `workers` single-threaded runs at once
    (by default `KokoroEngine.parallel_runs`: one per core on the CPU), handed out in order; a
    text of one piece gets one run on every core. At most one piece per worker is held ahead.
    `progress` is told how many characters of sentences each handed-out piece finished;
    ``language`` overrides the voice's."""
    engine.check(text, voice, speed, language)
    workers = workers or engine.parallel_runs
    pieces = engine.plan(text, engine.language_for(voice, language))
    first = next(pieces, None)
    second = next(pieces, None)
    if first is None:
        return
    if second is None:
        yield render_whole(engine, first, voice, speed, engine.max_threads).audio
        if progress is not None:
            progress(len(first.text))
        return

    def audio(piece: Piece) -> np.ndarray:
        return render_whole(engine, piece, voice, speed).audio

    with ThreadPoolExecutor(workers, thread_name_prefix="render") as pool:
        running = deque((piece, pool.submit(audio, piece)) for piece in (first, second))
        while running:
            while len(running) < workers and (piece := next(pieces, None)) is not None:
                running.append((piece, pool.submit(audio, piece)))
            piece, rendering = running.popleft()
            yield rendering.result()
            if progress is not None and piece.ends_sentence:
                progress(len(piece.text))


async def astream(
    engine: KokoroEngine, text: str, voice: str = DEFAULT_VOICE, speed: float = 1.0, language: str | None = None
) -> AsyncIterator[np.ndarray]:
    """`stream`'s audio; every blocking step (the plan, each model run) runs in a worker thread."""
    pieces = stream(engine, text, voice, speed, language=language)
    while (rendered := await asyncio.to_thread(next, pieces, None)) is not None:
        yield rendered.audio


def synthesize(
    engine: KokoroEngine, text: str, voice: str = DEFAULT_VOICE, speed: float = 1.0, language: str | None = None
) -> np.ndarray:
    """The whole audio of ``text`` as one float32 array at 24 kHz."""
    chunks = [rendered.audio for rendered in stream(engine, text, voice, speed, language=language)]
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)
