"""Kokoro-82M on ONNX Runtime: load, phonemize, infer, trim; audio comes out piece by piece.

A request's text is cut into sentences (the text layer's chunker), and each sentence into
batches within the model's 510-phoneme window, so the first audio of a long block costs
no more than its first sentence alone. The engine has one way to synthesize:
:meth:`KokoroEngine.plan` cuts a text into pieces and :meth:`KokoroEngine.render_parts`
renders one piece; the server's scheduler decides which piece runs when, on how many
threads. A whole text outside the server (the CLI, the benches) goes through
`voicestream.engine.offline`, built on the same two.
"""

from __future__ import annotations

import logging
import os
import threading
import unicodedata
import weakref
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from voicestream.catalog import (
    DEFAULT_LANGUAGE,
    DEFAULT_VOICE,
    MAX_SPEED,
    MIN_SPEED,
    InvalidVoiceBlend,
    UnsupportedLanguage,
    VoiceBlend,
    parse_voice,
    resolve_language,
)
from voicestream.cpus import available_cpus
from voicestream.engine import memory
from voicestream.engine.alignment import (
    TimedWord,
    shift_words,
    time_words,
)
from voicestream.engine.errors import (
    DeviceUnavailableError,
    EmptyTextError,
    InvalidMarkupError,
    InvalidSpeedError,
    InvalidVoiceBlendError,
    TextTooLongError,
    UnknownVoiceError,
    UnsupportedLanguageError,
)
from voicestream.engine.graph import ModelGraph, SplitGraph, load_graph
from voicestream.engine.marked import MarkedPlanner
from voicestream.engine.phonemes import (
    Phonemizer,
    split_before_break_word,
    split_first_clause,
    split_phonemes,
)
from voicestream.engine.piece import Piece
from voicestream.engine.silence import DEFAULT_PAUSES, Pauses, SpeechFit, fit_to_speech
from voicestream.engine.vocoder import (
    FEATURE_SAMPLES,
    FIRST_WINDOW_S,
    Front,
    SplitModel,
    silent_edges,
    speech_frames,
    word_seams,
)
from voicestream.engine.voices import VoiceBank
from voicestream.engine.weights import ModelFiles, Progress, resolve_weights, variant_for
from voicestream.engine.words import SentenceWordPlan, WordPlanner
from voicestream.text import IncrementalSentenceChunker
from voicestream.text.lexicon import Lexicon, LexiconError
from voicestream.text.markup import Markup, MarkupError, Pause, Pronounced, Said, Voicing
from voicestream.text.markup import parse as parse_markup
from voicestream.text.normalize import normalize_traced
from voicestream.text.spans import TracedText

if TYPE_CHECKING:
    import onnxruntime as ort

log = logging.getLogger(__name__)

SAMPLE_RATE = 24_000
DEFAULT_MAX_TEXT_CHARS = 20_000
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class RenderedPiece:
    """A piece's audio, and its words timed from the start of that audio (empty unless the
    piece was planned with words). From `KokoroEngine.render_parts`, one part of a piece:
    ``more`` says that parts of the same piece follow (its words but the last come with its
    first audible part, the last with its last part)."""

    audio: np.ndarray
    words: list[TimedWord]
    more: bool = False


def split_sentences(text: str) -> list[str]:
    """The sentences of a complete text, as the streaming chunker would release them."""
    chunker = IncrementalSentenceChunker()
    return [*chunker.feed(text), *chunker.flush()]


def _session(model: str | bytes, providers: list[str], threads: int) -> ort.InferenceSession:
    import onnxruntime as ort

    return ort.InferenceSession(model, session_options(threads), providers=providers)


def session_options(threads: int) -> ort.SessionOptions:
    """The engine's session settings (`voicestream bench ort` measures each against its
    alternatives)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    # Idle worker threads sleep instead of spinning: on a few shared cores a spinning pool
    # takes CPU from the LLM and the other runs between this session's runs.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def _on_disk(graph: ModelGraph) -> bool:
    """Whether every model of ``graph`` is a file (the graph cache's), not bytes in memory."""
    models = [graph.model] + ([] if graph.split is None else [graph.split.front, graph.split.vocoder])
    return all(isinstance(model, str) for model in models)


def _providers(device: str) -> list[str]:
    import onnxruntime as ort

    if device not in DEVICES:
        raise DeviceUnavailableError(f"Unknown device {device!r}; choose one of {', '.join(DEVICES)}.")
    if device == "cuda":
        if "CUDAExecutionProvider" in ort.get_available_providers():
            return ["CUDAExecutionProvider", "CPUExecutionProvider"]
        log.warning(
            "CUDA was requested but this onnxruntime has no CUDAExecutionProvider "
            "(install voicestream[cuda] on a machine with an NVIDIA GPU); running on the CPU."
        )
    return ["CPUExecutionProvider"]


def _blend(voice: str) -> VoiceBlend:
    """The voice or blend ``voice`` names (`voicestream.catalog.parse_voice`); raises
    :class:`InvalidVoiceBlendError`."""
    try:
        return parse_voice(voice)
    except InvalidVoiceBlend as error:
        raise InvalidVoiceBlendError(str(error)) from None


def max_run_threads() -> int:
    """The most intra-op threads one model run may use: every available core (affinity and
    cgroup quota, see `voicestream.cpus`), or ``VOICESTREAM_THREADS`` if set."""
    configured = os.environ.get("VOICESTREAM_THREADS")
    return max(1, int(configured)) if configured else available_cpus()


class KokoroEngine:
    """The speech model, shared by every session of a server.

    ONNX Runtime fixes a session's intra-op thread count when the session is made, so on
    the CPU the engine holds two sessions of the same weights: one single-threaded, for
    steady work that runs one piece per core in parallel, and one with every core
    (`max_threads`), for a first chunk that has the machine to itself; windowed pieces run
    on a front and vocoder pair of each (`voicestream.engine.graph`). `plan` cuts a text
    into pieces and `render_parts` renders one on the thread count the caller chose (the
    server's scheduler decides it from what else runs), a windowed piece's audio as it is
    made; both are safe to call from several threads at once. The engine schedules nothing:
    its caller decides which piece runs when (`voicestream.engine.offline` for a whole text).
    """

    sample_rate = SAMPLE_RATE

    def __init__(
        self,
        files: ModelFiles,
        device: str = "cpu",
        max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
        max_threads: int | None = None,
        pauses: Pauses = DEFAULT_PAUSES,
        first_window_s: float = FIRST_WINDOW_S,
        idle_release: memory.IdleRelease | None = None,
        lexicon: Lexicon | None = None,
    ) -> None:
        providers = _providers(device)
        self.files = files
        self.idle_release = idle_release or memory.IdleRelease()
        """What counts this engine's model runs, hands the heap back after them and renews its
        sessions (`voicestream.engine.memory`): the server's, or one of the engine's own."""
        self.pauses = pauses
        self.first_window_s = first_window_s
        """The first vocoder window of a `Piece.windowed` piece (server ``--first-window-ms``;
        `FIRST_WINDOW_S` by default): its first audio waits for this much audio, not for all
        of it. 0 renders every piece whole."""
        self.max_text_chars = max_text_chars
        graph = load_graph(files.model_path, providers)
        self._durations_output = graph.durations
        self._split = graph.split
        self._providers = providers
        single = _session(graph.model, providers, threads=1)
        self.providers: list[str] = single.get_providers()
        self.device = "cuda" if self.providers[0] == "CUDAExecutionProvider" else "cpu"
        self.max_threads = 1 if self.device == "cuda" else max_threads or max_run_threads()
        self._sessions = {1: single}
        if self.max_threads > 1:
            self._sessions[self.max_threads] = _session(graph.model, providers, self.max_threads)
        inputs = {i.name: i for i in single.get_inputs()}
        self._tokens_input = "input_ids" if "input_ids" in inputs else "tokens"
        self._speed_dtype = np.int32 if "int" in inputs["speed"].type else np.float32
        self._outputs = [single.get_outputs()[0].name, *([graph.durations] if graph.durations else [])]
        # The front and vocoder pairs run windowed pieces only: the whole model is a little
        # faster on a whole piece. Made when the first window is on, or when first needed.
        self._split_models: dict[int, SplitModel] = {}
        self._split_lock = threading.Lock()
        if first_window_s > 0 and graph.split is not None:
            for threads in self._sessions:
                self.split_model(threads)
        self._phonemizer = Phonemizer()
        self.lexicon = lexicon if lexicon is not None else Lexicon()
        """The server's lexicons (``serve --lexicon``): applied to every text before its G2P."""
        self.lexicon.check(self._phonemizer.vocab)
        self._silent_tokens = frozenset(
            {0} | {i for c, i in self._phonemizer.vocab.items() if unicodedata.category(c)[0] in "PZ"}
        )
        """The pad, punctuation and space tokens: what a piece's silent edges are made of."""
        self._voices = VoiceBank(files.voices_dir)
        self._renewable_graph = graph if self.device == "cpu" and _on_disk(graph) else None
        """The graph files the sessions are built again from (`renew_sessions`); None where the
        graph lives in memory only (its bytes are not kept for this) or runs on a GPU."""
        self.renewals = 0
        if self._renewable_graph is not None:
            self.idle_release.renew_when_grown(self)

    def renew_sessions(self, still_quiet: Callable[[], bool]) -> bool:
        """Build each session that had runs at once again from the same graph files, one at a
        time, each swapped in once made (a run going on keeps the session it started on), while
        ``still_quiet()``.

        An ONNX Runtime session keeps memory from the runs it made at once on several threads,
        which only dropping it gives back (`voicestream.engine.memory`). True when every
        session was renewed. A session that cannot be built again (its cache files gone) is
        logged once, and the engine keeps the sessions it has and renews no more."""
        graph = self._renewable_graph
        if graph is None:
            return False
        try:
            return self._renew_each(graph, still_quiet)
        except Exception:
            self._renewable_graph = None
            log.exception("could not build the model sessions again from %s; keeping the ones loaded", graph.model)
            return False

    def has_sessions_to_renew(self) -> bool:
        """Whether a session of this engine had runs at once since it was built (only those
        keep memory a renewal gives back)."""
        if self._renewable_graph is None:
            return False
        with self._split_lock:
            pairs = list(self._split_models.values())
        return any(map(self.idle_release.ran_at_once, [*self._sessions.values(), *(s for p in pairs for s in p.sessions)]))

    def _renew_each(self, graph: ModelGraph, still_quiet: Callable[[], bool]) -> bool:
        for threads, session in list(self._sessions.items()):
            if not self.idle_release.ran_at_once(session):
                continue
            if not still_quiet():
                return False
            renewed = _session(graph.model, self._providers, threads)
            self._release_when_freed(self._sessions[threads])
            self._sessions[threads] = renewed
        with self._split_lock:
            pairs = list(self._split_models.items())
        for threads, old in pairs:
            if not any(map(self.idle_release.ran_at_once, old.sessions)):
                continue
            if not still_quiet() or graph.split is None:
                return False
            pair = self._split_pair(graph.split, threads)
            with self._split_lock:
                self._release_when_freed(self._split_models[threads])
                self._split_models[threads] = pair
        self.renewals += 1
        return True

    def _release_when_freed(self, replaced: object) -> None:
        """Once ``replaced`` (a session or a front and vocoder pair a renewal replaced) is freed,
        the heap is released again: a parked request that was in the middle of a piece may hold
        it long after the renewal, and when it lets go no model run follows to ask for a release."""
        weakref.finalize(replaced, self.idle_release.release_soon)

    def _split_pair(self, split: SplitGraph, threads: int) -> SplitModel:
        """A front and vocoder pair of ``split`` on ``threads`` threads, counted by this engine's release."""
        return SplitModel(
            _session(split.front, self._providers, threads),
            _session(split.vocoder, self._providers, threads),
            self.idle_release,
        )

    @classmethod
    def load(
        cls,
        model_dir: Path | str | None = None,
        device: str = "cpu",
        variant: str = "int8",
        progress: Progress | None = None,
        warm_up: bool = True,
        pauses: Pauses = DEFAULT_PAUSES,
        first_window_s: float = FIRST_WINDOW_S,
        idle_release: memory.IdleRelease | None = None,
        lexicon: Lexicon | None = None,
    ) -> KokoroEngine:
        """Resolve the weights, build the session and (by default) warm it up once."""
        engine = cls(
            resolve_weights(model_dir, variant_for(device, variant), progress), device=device, pauses=pauses,
            first_window_s=first_window_s, idle_release=idle_release, lexicon=lexicon,
        )
        if warm_up:
            engine._warm_up()
        return engine

    def _warm_up(self) -> None:
        """Say a short text once on the single-threaded sessions, as a request would: ONNX
        Runtime's first run of a session is slow, and a listener should not wait for it."""
        voice = DEFAULT_VOICE if DEFAULT_VOICE in self.voices else self.voices[0]
        for piece in self.plan("Warm up.", self.language_for(voice)):
            for _ in self.render_parts(piece, voice, 1.0):
                pass

    @property
    def can_window(self) -> bool:
        """Whether a piece can be vocoded window by window (`Piece.windowed`): the model's
        graph was cut and the first window is on."""
        return self._split is not None and self.first_window_s > 0

    @property
    def parallel_runs(self) -> int:
        """How many model runs are worth running at once: one per core on the CPU, one on a GPU."""
        return 1 if self.device == "cuda" else self.max_threads

    @property
    def voices(self) -> list[str]:
        return self._voices.names

    def voice_pack(self, voice: str) -> np.ndarray:
        """The voice's style pack, (510, 1, 256) float32: what other Kokoro runtimes load."""
        return self._voices.pack(voice)

    def language_for(self, voice: str, language: str | None = None) -> str:
        """The language to speak: ``language`` if given (short forms accepted), else the voice's.

        Raises :class:`UnsupportedLanguageError` or :class:`InvalidVoiceBlendError`.
        """
        if language is None:
            return _blend(voice).language
        try:
            return resolve_language(language)
        except UnsupportedLanguage as error:
            raise UnsupportedLanguageError(str(error)) from None

    def check(
        self, text: str, voice: str, speed: float, language: str | None = None, lexicon: Lexicon | None = None
    ) -> None:
        """Raise the typed error for the first thing wrong with a request, before any work starts:
        its markup too (`InvalidMarkupError`), whose unknown elements are logged once here."""
        if not text or not text.strip():
            raise EmptyTextError("The text is empty; send at least one word to speak.")
        if len(text) > self.max_text_chars:
            raise TextTooLongError(
                f"The text has {len(text)} characters; at most {self.max_text_chars} are accepted in one request."
            )
        self.check_voice(voice, speed, language)
        marked = self.markup(text, self.language_for(voice, language), lexicon)
        if marked is None:
            return
        spoken = [item for item in marked.items if isinstance(item, Said | Pronounced)]
        if not any(isinstance(item, Pause) for item in marked.items) and not any(
            not isinstance(item, Said) or item.text.text.strip() for item in spoken
        ):
            raise EmptyTextError("The text is empty once its markup is read; send at least one word to speak.")
        for name in {item.voicing.voice for item in spoken if item.voicing.voice is not None}:
            self.check_voice(name, speed)
        if marked.unknown:
            log.warning("SSML elements not supported, their text read: %s", ", ".join(marked.unknown))

    def markup(self, text: str, language: str, lexicon: Lexicon | None = None) -> Markup | None:
        """The markup of ``text`` (`voicestream.text.markup`) with the engine's lexicon and
        ``lexicon`` applied to its text; None for a text with neither (planned as plain text).
        Raises `InvalidMarkupError`."""
        lexicon = self.lexicon if lexicon is None else self.lexicon + lexicon
        vocabulary = self._phonemizer.vocab
        try:
            marked = parse_markup(text, language, vocabulary)
            if not lexicon:
                return marked
            items = marked.items if marked is not None else (Said(TracedText(text), Voicing(language)),)
            applied = [part for item in items for part in (lexicon.apply(item, vocabulary) if isinstance(item, Said) else [item])]
        except (MarkupError, LexiconError) as error:
            raise InvalidMarkupError(error.message) from None
        if marked is None and len(applied) == 1:
            return None
        return Markup(tuple(applied), marked.unknown if marked is not None else ())

    def check_voice(self, voice: str, speed: float, language: str | None = None) -> None:
        """Raise the typed error for a voice, blend, speed or language this engine cannot
        speak: what a stream checks when it opens, before any of its text has come."""
        self.language_for(voice, language)
        for name in _blend(voice).names:
            if name not in self._voices:
                raise UnknownVoiceError(f"Unknown voice {name!r}. Available voices: {', '.join(self.voices)}.")
        if not MIN_SPEED <= speed <= MAX_SPEED:
            raise InvalidSpeedError(f"Speed {speed} is out of range; it must be between {MIN_SPEED} and {MAX_SPEED}.")

    def plan(
        self, text: str, language: str = DEFAULT_LANGUAGE, cut_first_clause: bool = True, words: bool = False,
        lexicon: Lexicon | None = None,
    ) -> Iterator[Piece]:
        """The pieces of ``text`` in speaking order, phonemized lazily one sentence at a time.

        Markup, emoji and symbols are rewritten for speech first (the text layer's
        normalizer, with ``language``'s rules). Laziness matters: phonemizing a long block
        up front would delay its first audio. With `cut_first_clause` the first sentence
        ends its first piece at a clause mark (`split_first_clause`), or, in an English
        sentence without one, before a break word (`split_before_break_word`): for a
        listener who hears nothing yet; one whose audio is playing gains nothing from the
        extra cut. For the same listener the first piece is also `Piece.windowed`, so that
        every API gives the same audio as the server gives a new listener. With `words`,
        each piece also knows which written word of ``text`` each of its phonemes speaks
        (and where that word is in ``text``), so that `render_parts` can time them; the
        pieces and their audio are the same with or without.

        A text with markup, or with a word of the lexicons (the engine's and ``lexicon``), is
        planned by `voicestream.engine.marked`; any other text as it always was.
        """
        marked = self.markup(text, language, lexicon)
        if marked is not None:
            yield from MarkedPlanner(self._phonemizer, self.pauses, self.can_window).pieces(
                text, marked, cut_first_clause, words
            )
            return
        spoken = normalize_traced(text, language)
        sentences = split_sentences(spoken.text)
        planner = WordPlanner(self._phonemizer, text, spoken, sentences, language) if words else None
        for s_index, sentence in enumerate(sentences):
            phonemes = self._phonemizer.phonemize(sentence, language)
            batches = split_phonemes(phonemes)
            # each piece's phonemes, the phonemes they are a run of, and those phonemes' words
            pieces: list[tuple[str, str, SentenceWordPlan | None]] | None = None
            if cut_first_clause and s_index == 0 and batches:  # first audio waits for this piece only
                batches = [*split_first_clause(batches[0]), *batches[1:]]
                halves = split_before_break_word(sentence) if len(batches) == 1 else []
                if len(halves) > 1 and language.startswith("en"):
                    head = len(halves[0].split())
                    pieces = []
                    for half, tokens in zip(halves, (slice(None, head), slice(head, None)), strict=True):
                        half_phonemes = self._phonemizer.phonemize(half, language)
                        half_words = planner.sentence(s_index, half_phonemes, tokens) if planner else None
                        pieces.append((half_phonemes, half_phonemes, half_words))
            if pieces is None:
                sentence_words = planner.sentence(s_index, phonemes) if planner else None
                pieces = [(batch, phonemes, sentence_words) for batch in batches]
            cursor = 0
            for b_index, (batch, source, sentence_words) in enumerate(pieces):
                piece_words = None
                if sentence_words is not None:
                    if b_index and sentence_words is not pieces[b_index - 1][2]:
                        cursor = 0
                    piece_words, cursor = sentence_words.for_batch(source, batch, cursor)
                first = s_index == 0 and b_index == 0
                last = s_index == len(sentences) - 1 and b_index == len(pieces) - 1
                yield Piece(
                    text=sentence,
                    phonemes=batch,
                    first=first,
                    last=last,
                    ends_sentence=b_index == len(pieces) - 1,
                    silence_before_s=self.pauses.before(first, ends_sentence_before=b_index == 0),
                    silence_after_s=self.pauses.after(last),
                    words=piece_words,
                    windowed=cut_first_clause and first and self.can_window,
                )

    def phonemes(self, text: str, language: str = DEFAULT_LANGUAGE, lexicon: Lexicon | None = None) -> str:
        """The phonemes the model receives for ``text`` (its markup and the lexicons applied),
        its pieces' joined by spaces: what ``/dev/phonemize`` answers."""
        return " ".join(p.phonemes for p in self.plan(text, language, cut_first_clause=False, lexicon=lexicon) if p.phonemes)

    def tokens(self, phonemes: str) -> list[int]:
        """Kokoro's token ids of ``phonemes``, with the padding token at each end, as the model takes them."""
        return [0, *self._phonemizer.tokenize(phonemes), 0]

    def model_inputs(self, piece: Piece, voice: str, speed: float) -> dict[str, np.ndarray] | None:
        """The model's input feed for one piece (None when it has no speakable token): what
        `render_parts` runs, for code that runs the graph itself (the benches, `similarity`).
        A piece's own voice and speed (its markup's) win over ``voice`` and ``speed``."""
        tokens = self._phonemizer.tokenize(piece.phonemes)
        if not tokens:
            return None
        voice = piece.voice or voice
        if piece.speed != 1.0:
            speed = min(MAX_SPEED, max(MIN_SPEED, speed * piece.speed))
        return {
            self._tokens_input: np.array([[0, *tokens, 0]], dtype=np.int64),
            "style": self._voices.style(voice, len(tokens)),
            "speed": np.array([speed], dtype=self._speed_dtype),
        }

    def render_parts(
        self, piece: Piece, voice: str, speed: float, threads: int = 1
    ) -> Generator[RenderedPiece, int | None, None]:
        """The piece's audio as it is made (blocking): one part, or for a `Piece.windowed`
        piece one part per vocoder window, the first as soon as its window is done. The
        parts join end to end into the piece's audio; the words come with the first part
        that has audio (a windowed piece's last word with its last part), timed from the
        piece's start.

        A thread count sent in (``parts.send(1)``) runs the windows after that part on so
        many threads: the speech scheduler goes on with one thread when another listener's
        first audio claims cores beside a run on every core, and a piece left after a part
        goes on on its next worker's threads."""
        feed = self.model_inputs(piece, voice, speed)
        if feed is None:  # a pause and nothing to say: its silence
            silence = round((piece.silence_before_s + piece.silence_after_s) * self.sample_rate)
            yield RenderedPiece(np.zeros(silence, dtype=np.float32), [])
            return
        key = self._threads_key(threads)
        if not piece.windowed or self._split is None:
            outputs = memory.run(self._sessions[key], self._outputs, feed, self.idle_release)
            durations = np.asarray(outputs[1]).ravel() if len(outputs) > 1 else None
            yield self._fitted(piece, np.asarray(outputs[0], dtype=np.float32).ravel(), durations)
            return
        model = self.split_model(key)
        yield from self._windowed(piece, model, model.front(feed), feed[self._tokens_input].ravel())

    def _threads_key(self, threads: int) -> int:
        """The session a run on ``threads`` threads uses: one thread, or every core."""
        return self.max_threads if threads > 1 else 1

    def split_model(self, threads: int) -> SplitModel:
        """The front and vocoder sessions for ``threads`` (1 or `max_threads`), made once.
        Raises `ValueError` for a model whose graph could not be cut."""
        if self._split is None:
            raise ValueError("this model's graph has no vocoder cut; its pieces run whole")
        with self._split_lock:
            if threads not in self._split_models:
                self._split_models[threads] = self._split_pair(self._split, threads)
            return self._split_models[threads]

    def _fitted(self, piece: Piece, audio: np.ndarray, durations: np.ndarray | None) -> RenderedPiece:
        """A whole run's audio cut to the piece's silences, with its words."""
        audio, trim = fit_to_speech(audio, self.sample_rate, piece.silence_before_s, piece.silence_after_s)
        if piece.words is None or durations is None:
            return RenderedPiece(audio, [])
        timed = time_words(piece.words, piece.phonemes, durations)
        return RenderedPiece(
            audio, shift_words(timed, trim.head_removed, trim.head_padded, audio.size, self.sample_rate)
        )

    def _windowed(
        self, piece: Piece, model: SplitModel, front: Front, tokens: np.ndarray
    ) -> Generator[RenderedPiece, int | None, None]:
        """`render_parts` window by window, its silences cut as the windows come (`SpeechFit`).

        The words but the last go out with the first audible part; the last goes with the
        last part, once the audio's length is known: Kokoro's last sound often fades before
        its phoneme's predicted end, so the fitted audio can end before it, and a word must
        end inside the audio (docs/PROTOCOL.md)."""
        edges = silent_edges(tokens, front.durations, self._silent_tokens)
        skipped = speech_frames(edges, front.frames)[0] * FEATURE_SAMPLES
        fit = SpeechFit(self.sample_rate, piece.silence_before_s, piece.silence_after_s)
        voiced = (front.frames - edges[1]) * FEATURE_SAMPLES - skipped
        timed = time_words(piece.words, piece.phonemes, front.durations) if piece.words is not None else []
        early, held = timed[:-1], timed[-1:]
        sent = 0  # samples given out so far
        seams = word_seams(tokens, front.durations, self._phonemizer.tokenize(" ")[0])
        vocoder = [model]  # the model of the next window: a thread count sent in changes it
        for window, last in model.windows(front, edges, seams, self.first_window_s, using=lambda: vocoder[0]):
            audio = fit.push(window, speech_follows=not last)
            if not audio.size:
                continue
            words: list[TimedWord] = []
            if sent == 0 and early:
                trim = fit.head
                assert trim is not None  # audio went out: the head is known
                words = shift_words(early, skipped + trim.head_removed, trim.head_padded,
                                    trim.head_padded + voiced - trim.head_removed, self.sample_rate)
            sent += audio.size
            threads = yield RenderedPiece(audio, words, more=True)
            if threads is not None:
                vocoder[0] = self.split_model(self._threads_key(threads))
        audio = fit.finish()
        trim = fit.head
        if trim is None:  # nothing audible: the whole audio comes out now, unfitted, with every word
            yield RenderedPiece(audio, shift_words(timed, skipped, 0, audio.size, self.sample_rate))
            return
        length = sent + audio.size
        yield RenderedPiece(audio, shift_words(held, skipped + trim.head_removed, trim.head_padded, length, self.sample_rate))
