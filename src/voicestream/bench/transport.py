"""``voicestream bench transport``: time to first audio byte over the bidirectional session.

A real server on 127.0.0.1 and a real WebSocket client; each figure is measured side by
side in one run (this machine is shared and noisy), interleaved so that noise hits every
column alike. Six measurements:

1. the reference's: a 267-character 4-sentence block sent as one message against its
   first sentence alone, with the bare engine's first chunk as the floor;
2. a pipelined session against a strictly sequential one (``ServerSettings.pipelined``,
   ``serve --sequential``): the block's 4 sentences as 4 messages sent at once, as an
   agent sends them; when each sentence starts, when the last byte arrives, and how long a
   player that starts at the first byte would fall silent waiting for audio;
3. latency mode against sentence mode: an answer that opens with a long sentence, cut by
   the chunker either way and spoken over one session; first audio, and the word error
   rate of the whole answer through Whisper tiny.en (does the early cut hurt prosody?);
4. the reference's three sentences on one live session (bytes and seconds), and the first
   audio of a newcomer beside three long monologues (the scheduler's priority);
5. each streaming face (the session, Cartesia's, ElevenLabs' and Deepgram's sockets): the
   block's first two sentences sent word by word, first audio and bytes per second of
   speech (``voicestream.bench.faces``).
6. two, then three sessions that each ask one long answer (about 30 s of audio) at the same
   moment: how long each listener's player falls silent after its first sound (the
   scheduling policy's fairness; three are more than two cores keep up with).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from websockets.asyncio.client import connect

from voicestream.audio import FirstSound, pcm16_to_float
from voicestream.bench.asr import transcribe, word_errors
from voicestream.bench.chaos import until_idle
from voicestream.bench.faces import measure_faces
from voicestream.bench.report import Advance, Cell, Chart, Report, Table, machine_context, progress
from voicestream.bench.stats import Timings
from voicestream.bench.texts import (
    BLOCK,
    FIRST_SENTENCE,
    LATENCY_ANSWER,
    MONOLOGUE,
    REFERENCE_SENTENCES,
)
from voicestream.engine import KokoroEngine, offline
from voicestream.engine.kokoro import split_sentences
from voicestream.server import ServerSettings, free_port, running_server
from voicestream.text import SENTENCES, IncrementalSentenceChunker

WS_PATH = "/invocations-bidirectional-stream"
SAMPLE_RATE = 24_000
PCM16_BYTES_PER_S = 2 * SAMPLE_RATE
ENDS = ("synthesis_complete", "synthesis_cancelled", "error")
REFERENCE_FIRST_MS, REFERENCE_BLOCK_MS = 156.7, 329.3


def ws_url(base_url: str) -> str:
    return base_url.replace("http://", "ws://") + WS_PATH


async def first_sound(url: str, text: str) -> FirstSound:
    """A new session, one request; when its first audio frame arrived and when a player
    starting then first sounds (seconds from the send; the rest of the request is cancelled)."""
    sound = FirstSound(SAMPLE_RATE)
    async with connect(url, max_size=None) as ws:
        sent = time.monotonic()
        await ws.send(json.dumps({"text": text, "request_id": "bench"}))
        while sound.heard_s is None:
            frame = await ws.recv()
            if isinstance(frame, bytes):
                sound.feed(time.monotonic() - sent, pcm16_to_float(frame))
            elif json.loads(frame)["type"] in ENDS:
                break
        await ws.send(json.dumps({"type": "cancel"}))
    return sound


async def first_audio_s(url: str, text: str) -> float:
    """A new session, one request; seconds until its first audio frame."""
    return (await first_sound(url, text)).first_audio_s or 0.0


@dataclass
class SpokenMessages:
    """What a client saw of several messages sent at once on one session (times from the send)."""

    first_audio_s: list[float] = field(default_factory=list)
    """Per message, when its first audio byte arrived."""
    first_sound_s: float | None = None
    """When a player starting at the first byte first sounds (the first message's, as a rule)."""
    done_s: float = 0.0
    stall_s: float = 0.0
    """How long a player starting at the first byte would have been silent waiting for audio."""
    pcm16: bytes = b""

    @property
    def audio_s(self) -> float:
        """Seconds of audio received."""
        return len(self.pcm16) / PCM16_BYTES_PER_S


async def speak_messages(url: str, messages: list[str]) -> SpokenMessages:
    """Send every message at once on a new session; time each one's first audio, and the end."""
    result = SpokenMessages()
    audio = bytearray()
    sound = FirstSound(SAMPLE_RATE)
    playing_until: float | None = None
    async with connect(url, max_size=None) as ws:
        sent = time.monotonic()
        for index, text in enumerate(messages):
            await ws.send(json.dumps({"text": text, "request_id": f"m{index}"}))
        completed = 0
        while completed < len(messages):
            frame = await ws.recv()
            now = time.monotonic() - sent
            if isinstance(frame, bytes):
                if len(result.first_audio_s) == completed:
                    result.first_audio_s.append(now)
                if playing_until is not None and now > playing_until:
                    result.stall_s += now - playing_until
                playing_until = max(playing_until or now, now) + len(frame) / PCM16_BYTES_PER_S
                audio += frame
                if sound.heard_s is None:
                    sound.feed(now, pcm16_to_float(frame))
                continue
            if json.loads(frame)["type"] in ENDS:
                completed += 1
        result.done_s = time.monotonic() - sent
    result.first_sound_s = sound.heard_s
    result.pcm16 = bytes(audio)
    return result


def _engine_first_chunk_s(engine: KokoroEngine, text: str) -> float:
    """The floor: the engine's first chunk on every core, as the server renders a first chunk."""
    started = time.perf_counter()
    next(offline.stream(engine, text, threads=engine.max_threads))
    return time.perf_counter() - started


def chunk_answer(text: str, latency_mode: bool) -> list[str]:
    """The chunks the agent would send for ``text`` streamed word by word: its default
    schedule (latency mode), or one sentence per chunk."""
    from voicestream.agent.runtime import DEFAULT_SCHEDULE

    chunker = IncrementalSentenceChunker(DEFAULT_SCHEDULE if latency_mode else SENTENCES)
    return [chunk for word in text.split(" ") for chunk in chunker.feed(word + " ")] + chunker.flush()


async def _three_sentences(url: str) -> list[list[Cell]]:
    rows: list[list[Cell]] = []
    async with connect(url) as ws:
        for index, (text, _, _) in enumerate(REFERENCE_SENTENCES):
            await ws.send(json.dumps({"text": text, "request_id": f"s{index}"}))
        received = 0
        while len(rows) < len(REFERENCE_SENTENCES):
            frame = await ws.recv()
            if isinstance(frame, bytes):
                received += len(frame)
                continue
            message = json.loads(frame)
            if message["type"] == "synthesis_complete":
                text, ref_bytes, ref_s = REFERENCE_SENTENCES[len(rows)]
                rows.append([text, ref_bytes, ref_s, received, message["total_duration_s"]])
                received = 0
    return rows


async def _monologue(url: str, text: str, started: asyncio.Event) -> None:
    async with connect(url) as ws:
        await ws.send(json.dumps({"text": text}))
        while True:
            if isinstance(await ws.recv(), bytes):
                started.set()


TRIAL_PAUSE_S = 0.3
"""The pause after each trial of `first_audio_beside_monologues`, idle and busy alike."""


async def first_audio_beside_monologues(
    url: str, trials: int, monologue: str = MONOLOGUE, text: str = "Hello there."
) -> tuple[list[FirstSound], list[FirstSound]]:
    """First audio and sound of ``text`` on an idle server, then beside 3 long monologues.
    Every trial is followed by the same pause; an idle trial also waits until the server
    renders nothing (the one before it was cancelled mid-piece)."""
    base_url = url.removesuffix(WS_PATH).replace("ws://", "http://")
    idle = []
    for _ in range(trials):
        # by the server's own accounting: the trial before was cancelled after its first
        # sound (its run stops at once, but the server ends it on its loop); bounded, a busy
        # server is measured busy
        await until_idle(base_url, 10.0, ("voicestream_rendering_pieces", "voicestream_queue_depth"), poll_s=0.05)
        idle.append(await first_sound(url, text))
        await asyncio.sleep(TRIAL_PAUSE_S)
    events = [asyncio.Event() for _ in range(3)]
    tasks = [asyncio.create_task(_monologue(url, monologue, event)) for event in events]
    try:
        for event in events:
            await event.wait()
        busy = []
        for _ in range(trials):
            busy.append(await first_sound(url, text))
            await asyncio.sleep(TRIAL_PAUSE_S)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return idle, busy


LONG_ANSWER = " ".join(split_sentences(MONOLOGUE)[:7])
"""About 30 s of audio: the long answer that several sessions ask for at once."""


@dataclass(frozen=True)
class TransportTexts:
    """The inputs; the defaults are the documented ones, tests pass tiny ones."""

    first_sentence: str = FIRST_SENTENCE
    block: str = BLOCK
    answer: str = LATENCY_ANSWER
    monologue: str = MONOLOGUE
    long_answer: str = LONG_ANSWER


@dataclass
class _Runs:
    spoken: dict[str, list[SpokenMessages]] = field(default_factory=dict)

    def add(self, label: str, run: SpokenMessages) -> None:
        self.spoken.setdefault(label, []).append(run)

    def median(self, label: str, value) -> float:
        return statistics.median(value(run) for run in self.spoken[label]) * 1000

    def heard_ms(self, label: str) -> float | None:
        """The median first audible sound of the label's runs (None if none was audible)."""
        heard = [run.first_sound_s for run in self.spoken[label] if run.first_sound_s is not None]
        return statistics.median(heard) * 1000 if heard else None


async def _speak_each(targets: dict[str, tuple[str, list[str]]], trials: int, advance: Advance) -> _Runs:
    """Each label's messages on its server, ``trials`` times, interleaved so that noise hits all alike."""
    runs = _Runs()
    for _ in range(trials):
        for label, (url, messages) in targets.items():
            runs.add(label, await speak_messages(url, messages))
        advance()
    return runs


async def _block_vs_first(url: str, engine: KokoroEngine, texts: TransportTexts, trials: int, advance: Advance):
    block: list[FirstSound] = []
    first: list[FirstSound] = []
    bare = []
    for _ in range(trials):
        first.append(await first_sound(url, texts.first_sentence))
        block.append(await first_sound(url, texts.block))
        bare.append(await asyncio.to_thread(_engine_first_chunk_s, engine, texts.first_sentence))
        advance()
    table = Table(
        "Time to first audio byte and to the first audible sound: 4-sentence block vs its first sentence",
        ["request", "chars", "mean ms", "median ms", "min ms", "max ms", "first sound median ms", "reference mean ms"],
    )
    for label, text, sounds, reference in (
        ("first sentence alone", texts.first_sentence, first, REFERENCE_FIRST_MS),
        ("block as one message", texts.block, block, REFERENCE_BLOCK_MS),
    ):
        table.add(f"{label} ({trials} trials)", len(text), *Timings.of(_arrivals(sounds)).cells(),
                  _heard_median_ms(sounds), reference)
    table.add(f"bare engine, first sentence, every core ({trials} trials)", len(texts.first_sentence),
              *Timings.of(bare).cells(), None, None)
    ratio = statistics.mean(_arrivals(block)) / statistics.mean(_arrivals(first))
    overhead_ms = (statistics.median(_arrivals(first)) - statistics.median(bare)) * 1000
    table.note = (
        f"block / first sentence (means): {ratio:.3f} (reference: {REFERENCE_BLOCK_MS / REFERENCE_FIRST_MS:.3f}); "
        f"server over bare engine (medians): {overhead_ms:+.1f} ms"
    )
    chart = Chart(
        "First audio byte: block vs first sentence (mean)", ["first sentence", "4-sentence block"],
        {"voicestream (2 CPU cores)": [statistics.mean(_arrivals(first)) * 1000, statistics.mean(_arrivals(block)) * 1000],
         "reference (GPU)": [REFERENCE_FIRST_MS, REFERENCE_BLOCK_MS]},
        "ms",
    )
    return table, chart


def _arrivals(sounds: list[FirstSound]) -> list[float]:
    return [sound.first_audio_s or 0.0 for sound in sounds]


def _heard_median_ms(sounds: list[FirstSound]) -> float | None:
    heard = [sound.heard_s for sound in sounds if sound.heard_s is not None]
    return statistics.median(heard) * 1000 if heard else None


async def _pipelined_vs_sequential(urls: dict[str, str], texts: TransportTexts, trials: int, advance: Advance):
    sentences = split_sentences(texts.block)
    runs = await _speak_each({label: (url, sentences) for label, url in urls.items()}, trials, advance)
    table = Table(
        f"Pipelined vs strictly sequential session: the block's {len(sentences)} sentences as "
        f"{len(sentences)} messages sent at once (medians of {trials})",
        ["session", "first audio ms", "first sound ms", "last sentence's first audio ms", "last byte ms",
         "player silent ms"],
    )
    for label in urls:
        table.add(
            label, runs.median(label, lambda r: r.first_audio_s[0]), runs.heard_ms(label),
            runs.median(label, lambda r: r.first_audio_s[-1]),
            runs.median(label, lambda r: r.done_s), runs.median(label, lambda r: r.stall_s),
        )
    pipelined, sequential = list(urls)
    speedup = runs.median(sequential, lambda r: r.done_s) / runs.median(pipelined, lambda r: r.done_s)
    table.note = f"sequential / pipelined, last byte (medians): {speedup:.2f}"
    chart = Chart(
        "Pipelined vs sequential session (medians)", ["first audio", "last sentence starts", "last byte"],
        {label: [runs.median(label, lambda r: r.first_audio_s[0]), runs.median(label, lambda r: r.first_audio_s[-1]),
                 runs.median(label, lambda r: r.done_s)] for label in urls},
        "ms",
    )
    return table, chart


async def _latency_vs_sentence(url: str, texts: TransportTexts, trials: int, advance: Advance):
    modes = {"latency mode": chunk_answer(texts.answer, True), "sentence mode": chunk_answer(texts.answer, False)}
    runs = await _speak_each({label: (url, chunks) for label, chunks in modes.items()}, trials, advance)
    table = Table(
        f"Latency mode vs sentence mode: an answer opening with a long sentence (medians of {trials})",
        ["mode", "chunks", "first chunk words", "first audio ms", "first sound ms", "last byte ms", "player silent ms",
         "WER %"],
    )
    for label, chunks in modes.items():
        edits = words = 0
        for run in runs.spoken[label]:
            heard = await asyncio.to_thread(transcribe, pcm16_to_float(run.pcm16), 24_000)
            run_edits, run_words = word_errors(texts.answer, heard)
            edits, words = edits + run_edits, words + run_words
        table.add(
            label, len(chunks), len(chunks[0].split()), runs.median(label, lambda r: r.first_audio_s[0]),
            runs.heard_ms(label),
            runs.median(label, lambda r: r.done_s), runs.median(label, lambda r: r.stall_s), 100 * edits / max(words, 1),
        )
    ratio = runs.median("latency mode", lambda r: r.first_audio_s[0]) / runs.median(
        "sentence mode", lambda r: r.first_audio_s[0]
    )
    table.note = f"latency / sentence mode, first audio (medians): {ratio:.2f}"
    chart = Chart(
        "Latency vs sentence mode (medians)", ["first audio", "last byte"],
        {label: [runs.median(label, lambda r: r.first_audio_s[0]), runs.median(label, lambda r: r.done_s)]
         for label in modes},
        "ms",
    )
    return table, chart


async def _contention(url: str, texts: TransportTexts, trials: int) -> Table:
    idle, busy = await first_audio_beside_monologues(url, trials, texts.monologue)
    table = Table(
        "First audio of 'Hello there.' beside three long monologues",
        ["'Hello there.' on a new session", "mean ms", "median ms", "min ms", "max ms", "first sound median ms"],
        note=f"busy / idle (medians): {statistics.median(_arrivals(busy)) / statistics.median(_arrivals(idle)):.2f}",
    )
    table.add("idle server", *Timings.of(_arrivals(idle)).cells(), _heard_median_ms(idle))
    table.add("beside 3 long monologues", *Timings.of(_arrivals(busy)).cells(), _heard_median_ms(busy))
    return table


async def _answers_at_once(url: str, texts: TransportTexts, trials: int, advance: Advance) -> Table:
    table = Table(
        f"Long answers at once, one per session: each listener's silence after its first sound (medians of {trials})",
        ["sessions", "answer s", "first audio ms (latest)", "silent ms (least)", "silent ms (most)",
         "silent ms (mean)", "audio made s per s", "silent ms floor (the last to end)"],
    )
    for sessions in (2, 3):
        runs: list[list[SpokenMessages]] = []
        for _ in range(trials):
            runs.append(list(await asyncio.gather(*(speak_messages(url, [texts.long_answer]) for _ in range(sessions)))))
            advance()
        answer_s = statistics.median(run.audio_s for listeners in runs for run in listeners)
        pace = statistics.median(made_per_s(listeners) for listeners in runs)
        latest_first_ms = _median_ms(runs, lambda listeners: max(run.first_audio_s[0] for run in listeners))
        table.add(
            sessions, answer_s, latest_first_ms,
            _median_ms(runs, lambda listeners: min(run.stall_s for run in listeners)),
            _median_ms(runs, lambda listeners: max(run.stall_s for run in listeners)),
            _median_ms(runs, lambda listeners: statistics.mean(run.stall_s for run in listeners)),
            pace, 1000 * silence_floor_s(answer_s, sessions, pace, latest_first_ms / 1000),
        )
    table.note = (
        "two sessions: the goal is at most 250 ms each; three: all alike rather than one. Audio made s per s: "
        "all the listeners' audio over the time from the sends to the last byte, the renders' pace together. "
        "Under the number of listeners (each plays 1 s a second), silence cannot be avoided at that pace: the "
        "listener whose answer ends last is silent at least answer × listeners / pace − answer − first audio"
    )
    return table


def made_per_s(listeners: list[SpokenMessages]) -> float:
    """Seconds of audio the server made for all ``listeners`` per second, from the sends to the last byte."""
    return sum(run.audio_s for run in listeners) / max(run.done_s for run in listeners)


def silence_floor_s(answer_s: float, listeners: int, pace: float, first_audio_s: float) -> float:
    """The least silence the listener whose answer ends last hears while renders make ``pace``
    seconds of audio a second for all ``listeners``: its last byte comes ``answer_s ×
    listeners / pace`` seconds after the sends, and by then its player, started at its
    first audio (``first_audio_s`` at the latest), can have played ``answer_s`` at most."""
    return max(0.0, answer_s * listeners / pace - answer_s - first_audio_s)


def _median_ms(runs: list[list[SpokenMessages]], value: Callable[[list[SpokenMessages]], float]) -> float:
    return statistics.median(value(listeners) for listeners in runs) * 1000


@contextmanager
def _servers(engine: KokoroEngine) -> Iterator[dict[str, str]]:
    """A pipelined and a sequential server over the same engine, both on 127.0.0.1."""
    sequential = ServerSettings(host="127.0.0.1", port=free_port(), pipelined=False)
    with running_server(engine) as pipelined_url, running_server(engine, sequential) as sequential_url:
        yield {"pipelined (voicestream)": ws_url(pipelined_url), "sequential (reference design)": ws_url(sequential_url)}


async def _measure(urls: dict[str, str], engine: KokoroEngine, texts: TransportTexts, trials: int) -> Report:
    context = machine_context()
    url = next(iter(urls.values()))
    with progress("bench transport", 6 * trials + 2) as advance:
        ttfa, ttfa_chart = await _block_vs_first(url, engine, texts, trials, advance)
        pipeline, pipeline_chart = await _pipelined_vs_sequential(urls, texts, trials, advance)
        latency, latency_chart = await _latency_vs_sentence(url, texts, trials, advance)
        sentences = Table(
            "Three sentences on one live session",
            ["sentence", "reference bytes", "reference s", "voicestream bytes", "voicestream s"],
            await _three_sentences(url),
        )
        advance()
        contention = await _contention(url, texts, trials)
        advance()
        two_sentences = " ".join(split_sentences(texts.block)[:2])
        faces = await measure_faces(url.removesuffix(WS_PATH), two_sentences, trials, advance)
        at_once = await _answers_at_once(url, texts, trials, advance)
    return Report(
        "transport",
        tables=[ttfa, pipeline, latency, sentences, contention, faces, at_once],
        charts=[ttfa_chart, pipeline_chart, latency_chart],
        context={**context, "trials": trials, "voice": "af_heart", "format": "pcm16"},
    )


def measure_transport(engine: KokoroEngine, trials: int = 5, texts: TransportTexts = TransportTexts()) -> Report:
    """Start a pipelined and a sequential server on 127.0.0.1 with ``engine`` and measure them."""
    with _servers(engine) as urls:
        return asyncio.run(_measure(urls, engine, texts, trials))
