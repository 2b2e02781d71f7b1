"""Top-level commands: ``say``, ``voices``, ``models``, ``demo``, ``bench``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from voicestream import limits
from voicestream.cli.progress import stderr, text_progress, weights_progress

if TYPE_CHECKING:  # the engine loads only for the commands that use it
    import numpy as np

    from voicestream.engine.alignment import TimedWord
    from voicestream.engine.kokoro import RenderedPiece

app = typer.Typer(
    help="Low-latency streaming speech for AI agents with Kokoro-82M.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
models_app = typer.Typer(help="Find, fetch and verify the Kokoro-82M weights.", no_args_is_help=True)
app.add_typer(models_app, name="models")

ModelDir = Annotated[
    Path | None,
    typer.Option("--model-dir", envvar="VOICESTREAM_MODEL_DIR", help="Directory with model.onnx and voices/*.bin."),
]
FORMAT_BY_SUFFIX = {
    ".wav": "wav", ".mp3": "mp3", ".m4a": "aac", ".mp4": "aac", ".aac": "aac", ".ogg": "opus", ".opus": "opus",
    ".flac": "flac", ".pcm": "pcm16", ".raw": "pcm16", ".ulaw": "mulaw", ".mulaw": "mulaw",
}
Device = Annotated[str, typer.Option("--device", help="Where the model runs: cpu or cuda.")]
Variant = Annotated[str, typer.Option("--variant", help="Model precision: int8, fp16 or fp32 (offline bundle: int8).")]


def load_engine(model_dir: Path | None, device: str = "cpu", variant: str = "int8", warm_up: bool = True):
    """Load the engine with a progress bar while weights are prepared; exit cleanly on a known error."""
    from voicestream.engine import EngineError, KokoroEngine

    try:
        with weights_progress() as progress:
            return KokoroEngine.load(model_dir, device=device, variant=variant, progress=progress, warm_up=warm_up)
    except EngineError as error:
        stderr.print(f"[red]error:[/red] {error.message}")
        raise typer.Exit(2) from None


@app.command()
def say(
    text: Annotated[str, typer.Argument(help="What to say; - reads standard input.")] = "",
    file: Annotated[
        Path | None, typer.Option("-f", "--file", help="Read the text from this file (- for standard input).")
    ] = None,
    output: Annotated[Path, typer.Option("-o", "--output", help="Audio file to write.")] = Path("out.wav"),
    voice: Annotated[str, typer.Option(help="Kokoro voice (see `voicestream voices`).")] = "af_heart",
    format: Annotated[
        str | None, typer.Option("--format", help="pcm16, wav, mp3, aac, opus, flac or mulaw; default from the file suffix.")
    ] = None,
    speed: Annotated[float, typer.Option(help="Speaking rate, 0.5 to 2.0.")] = 1.0,
    sample_rate: Annotated[int, typer.Option("--sample-rate", help="Output sample rate in Hz.")] = 24000,
    lang: Annotated[
        str | None, typer.Option("--lang", help="Read the text as this language (es, fr, ja...); default: the voice's.")
    ] = None,
    subtitles: Annotated[
        Path | None, typer.Option("--subtitles", help="Also write captions: .vtt (word times in each cue) or .srt.")
    ] = None,
    timestamps: Annotated[
        Path | None, typer.Option("--timestamps", help="Also write the word times as JSON.")
    ] = None,
    model_dir: ModelDir = None,
    device: Device = "cpu",
) -> None:
    """Synthesize TEXT (or a file, or standard input) to an audio file, on every core."""
    from voicestream.audio import AudioError, create_encoder, finalize_wav
    from voicestream.engine import InvalidInputError, offline

    text = _read_text(text, file)
    chosen = format or FORMAT_BY_SUFFIX.get(output.suffix.lower(), "wav")
    try:
        encoder = create_encoder(chosen, sample_rate=sample_rate)
    except AudioError as error:
        stderr.print(f"[red]error:[/red] {error}")
        raise typer.Exit(2) from None
    engine = load_engine(model_dir, device, warm_up=False)
    engine.max_text_chars = max(engine.max_text_chars, len(text))  # a file may be a book: audio streams to disk
    try:
        engine.check(text, voice, speed, lang)
    except InvalidInputError as error:
        stderr.print(f"[red]error:[/red] {error.message}")
        raise typer.Exit(2) from None
    if subtitles is not None and subtitles.suffix.lower() not in (".vtt", ".srt"):
        stderr.print("[red]error:[/red] --subtitles must name a .vtt or .srt file.")
        raise typer.Exit(2)
    samples = 0
    words: list[TimedWord] = []
    with output.open("wb") as out, text_progress(len(text)) as advance:
        if subtitles is None and timestamps is None:
            chunks = offline.stream_parallel(engine, text, voice, speed, progress=advance, language=lang)
        else:  # word times come piece by piece on one run at a time
            timed = offline.stream(engine, text, voice, speed, engine.max_threads, lang, words=True)
            chunks = _timed_chunks(timed, words)
        for chunk in chunks:
            samples += chunk.size
            out.write(encoder.encode(chunk))
        out.write(encoder.finish())
    _write_word_files(words, subtitles, timestamps)
    if chosen == "wav":  # the streamed header has open-ended sizes; a file gets the real ones
        output.write_bytes(finalize_wav(output.read_bytes()))
    stderr.print(f"Wrote {output} ({chosen}, {samples / engine.sample_rate:.3f} s, voice {voice}).")


def _timed_chunks(pieces: Iterator[RenderedPiece], words: list[TimedWord]) -> Iterator[np.ndarray]:
    for piece in pieces:
        words.extend(piece.words)
        yield piece.audio


def _write_word_files(words: list[TimedWord], subtitles: Path | None, timestamps: Path | None) -> None:
    from voicestream.cli.subtitles import to_json, to_srt, to_webvtt

    if subtitles is not None:
        subtitles.write_text((to_srt if subtitles.suffix.lower() == ".srt" else to_webvtt)(words), encoding="utf-8")
        stderr.print(f"Wrote {subtitles} ({len(words)} words).")
    if timestamps is not None:
        timestamps.write_text(to_json(words), encoding="utf-8")
        stderr.print(f"Wrote {timestamps} ({len(words)} words).")


def _read_text(text: str, file: Path | None) -> str:
    """The text to say: the argument, or a file's or standard input's content."""
    if file is not None and text:
        stderr.print("[red]error:[/red] give the text or --file, not both.")
        raise typer.Exit(2)
    source = str(file) if file is not None else text
    if source != "-" and file is None:
        return text
    try:
        return sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        stderr.print(f"[red]error:[/red] cannot read {source}: {error}")
        raise typer.Exit(2) from None


@app.command()
def voices(model_dir: ModelDir = None) -> None:
    """List the available voices with their language and gender (blend them as a+b or a(2)+b(1))."""
    from voicestream.engine import EngineError, resolve_weights
    from voicestream.protocol import voice_catalog

    try:
        with weights_progress() as progress:
            files = resolve_weights(model_dir, progress=progress)
    except EngineError as error:
        stderr.print(f"[red]error:[/red] {error.message}")
        raise typer.Exit(2) from None
    for info in voice_catalog(files.voice_names()):
        typer.echo(f"{info.name:16} {info.language or '-':6} {info.gender or '-'}")


@models_app.command("pull")
def models_pull(model_dir: ModelDir = None, variant: Variant = "int8") -> None:
    """Fetch and verify the weights now (Hub if reachable, else the offline bundle)."""
    from voicestream.engine import EngineError, resolve_weights

    try:
        with weights_progress() as progress:
            files = resolve_weights(model_dir, variant=variant, progress=progress)
    except EngineError as error:
        stderr.print(f"[red]error:[/red] {error.message}")
        raise typer.Exit(2) from None
    typer.echo(f"model:  {files.model_path}\nvoices: {files.voices_dir} ({len(files.voice_names())})\nsource: {files.source}")


@models_app.command("list")
def models_list() -> None:
    """Show which weights are cached and where each source stands."""
    from voicestream.engine.weights import VARIANTS, cache_dir, cached_weights, explicit_model_dir

    explicit = explicit_model_dir()
    typer.echo(f"explicit directory: {explicit or '(none: set --model-dir or VOICESTREAM_MODEL_DIR)'}")
    for variant in VARIANTS:
        cached = cached_weights(variant)
        state = f"{cached.model_path} ({len(cached.voice_names())} voices)" if cached else "not cached"
        typer.echo(f"{variant:5} {state}  [{cache_dir(variant)}]")


@models_app.command("derive")
def models_derive(
    variant: Annotated[str, typer.Argument(help="fp32 (the int8 model dequantized) or fp16 (from fp32).")],
) -> None:
    """Derive a float model from the offline bundle's int8 one into the cache (for CUDA
    without the Hub), and compare its audio with its source's."""
    import time

    from voicestream.engine import EngineError
    from voicestream.engine.similarity import similarity
    from voicestream.engine.weights import DERIVED_FROM, cache_dir, derive_weights

    started = time.perf_counter()
    try:
        with weights_progress() as progress:
            files = derive_weights(variant, progress)
    except EngineError as error:
        stderr.print(f"[red]error:[/red] {error.message}")
        raise typer.Exit(2) from None
    seconds = time.perf_counter() - started
    source = cache_dir(DERIVED_FROM[variant]) / files.model_path.name
    alike = similarity(files.model_path, source, files.voices_dir)
    typer.echo(
        f"model:  {files.model_path} ({files.model_path.stat().st_size / 1e6:,.0f} MB, {seconds:.1f} s)\n"
        f"source: {files.source}\n"
        f"against {DERIVED_FROM[variant]}: {alike.tokens_same:.1%} of token durations the same, length ratio "
        f"{alike.length_ratio:.3f}, vocoder waveform correlation {alike.vocoder_correlation:.4f}"
    )


LogLevel = Annotated[str, typer.Option("--log-level", help="debug, info, warning or error.")]
LogJson = Annotated[bool, typer.Option("--log-json", help="One JSON object per log line (for log collectors).")]
API_KEY_HELP = (
    "Require this key on every route but /ping and the page: an Authorization: Bearer KEY or "
    "X-API-Key: KEY header, or on a WebSocket the subprotocol voicestream.key.KEY (never in the URL)."
)
ApiKey = Annotated[str | None, typer.Option("--api-key", envvar="VOICESTREAM_API_KEY", help=API_KEY_HELP)]
CorsOrigins = Annotated[
    list[str] | None,
    typer.Option("--cors-origin", help="A browser origin (https://app.example) allowed to call from another "
                 "site and open WebSocket sessions (repeatable); other sites' pages are refused."),
]
AllowedHosts = Annotated[
    list[str] | None,
    typer.Option("--allowed-host", envvar="VOICESTREAM_ALLOWED_HOSTS",
                 help="A Host name accepted beside localhost, 127.0.0.1, ::1 and the address a request "
                 "arrives on (repeatable, or comma-separated in the variable); * accepts any, as the "
                 "container images do behind SageMaker, AgentCore or a load balancer. Others get 403 "
                 "(DNS rebinding)."),
]
GraceS = Annotated[
    float, typer.Option("--grace-s", help="On SIGTERM, seconds in-flight requests may take to finish.")
]
LOCAL_HOST_HELP = "Address to listen on (0.0.0.0 to be reachable from other machines; containers pass it)."


@app.command()
def serve(
    host: Annotated[str, typer.Option(help=LOCAL_HOST_HELP)] = limits.HOST,
    port: Annotated[int, typer.Option(help="Port (SageMaker uses 8080).")] = limits.PORT,
    device: Device = "cpu",
    model_dir: ModelDir = None,
    variant: Variant = "int8",
    max_sessions: Annotated[
        int, typer.Option("--max-sessions", help="Open connections beyond this get `busy`: sessions, Cartesia "
                          "sockets and Wyoming connections together.")
    ] = limits.MAX_SESSIONS,
    max_queue: Annotated[int, typer.Option("--max-queue", help="Queued requests beyond this get `busy`.")] = limits.MAX_QUEUE,
    max_session_requests: Annotated[
        int, typer.Option("--max-session-requests", help="Unsent requests one session may hold, and open contexts "
                          "one Cartesia socket may hold; more get `busy`.")
    ] = limits.MAX_SESSION_REQUESTS,
    max_body_bytes: Annotated[
        int, typer.Option("--max-body-bytes", help="Largest HTTP body, WebSocket message or Wyoming event "
                          "accepted.")
    ] = limits.MAX_BODY_BYTES,
    idle_timeout: Annotated[
        float, typer.Option("--idle-timeout", help="Close a connection (a session, a Cartesia socket, a Wyoming "
                            "connection) that received no message, sent no frame and has nothing left to send "
                            "for this many seconds; an open Cartesia context, session utterance or Wyoming "
                            "stream waiting for more text has nothing left to send.")
    ] = limits.IDLE_TIMEOUT_S,
    stale_after: Annotated[
        float, typer.Option("--stale-after", help="Answer `request_stale` for a request that waited this many "
                            "seconds here for its first piece (the server's clock, not the client's).")
    ] = limits.STALE_AFTER_S,
    listener_budget_bytes: Annotated[
        int, typer.Option("--listener-budget-bytes", help="Rendered, unsent audio one session or response may "
                          "hold before its next piece waits (bytes as encoded).")
    ] = limits.LISTENER_BUDGET_BYTES,
    buffer_budget_bytes: Annotated[
        int, typer.Option("--buffer-budget-bytes", help="Rendered, unsent audio of all requests together "
                          "(bytes); split evenly between listeners when short.")
    ] = limits.BUFFER_BUDGET_BYTES,
    max_session_errors: Annotated[
        int, typer.Option("--max-session-errors", help="Bad messages in a row a session may send; one more "
                          "closes it with 1008.")
    ] = limits.MAX_SESSION_ERRORS,
    send_timeout: Annotated[
        float, typer.Option("--send-timeout", help="Drop a connection (a session, a Cartesia socket, a Wyoming "
                            "connection: counted as a 1008 close, sent as a TCP reset) that takes no byte of its "
                            "frames, or a streamed HTTP response that takes no body chunk (its connection dropped "
                            "too), for this many seconds; its requests end and its slots are freed.")
    ] = limits.SEND_TIMEOUT_S,
    send_buffer_bytes: Annotated[
        int, typer.Option("--send-buffer-bytes", min=4096, help="Kernel send buffer of each accepted connection "
                          "(bytes; Linux doubles it): bounds the audio a peer that stopped reading can be sent "
                          "before --send-timeout starts to run.")
    ] = limits.SEND_BUFFER_BYTES,
    max_whole_files: Annotated[
        int, typer.Option("--max-whole-files", help="`stream: false` answers (POST /invocations and "
                          "/dev/captioned_speech) prepared at once; more get `busy`.")
    ] = limits.MAX_WHOLE_FILES,
    grace_s: GraceS = limits.GRACE_S,
    api_key: Annotated[
        str | None,
        typer.Option("--api-key", envvar="VOICESTREAM_API_KEY",
                     help=f"{API_KEY_HELP} The Wyoming port (--wyoming-port) checks no key."),
    ] = None,
    cors_origin: CorsOrigins = None,
    allowed_host: AllowedHosts = None,
    log_level: LogLevel = "info",
    log_json: LogJson = False,
    leading_silence_ms: Annotated[
        float | None,
        typer.Option("--leading-silence-ms", min=0, help="Silence before a request's first sound [default: 20]."),
    ] = None,
    sentence_pause_ms: Annotated[
        float | None,
        typer.Option("--sentence-pause-ms", min=0,
                     help="Silence between sentences, within a request and from one to the next [default: 350]."),
    ] = None,
    first_window_ms: Annotated[
        float,
        typer.Option("--first-window-ms", min=0,
                     help="Vocode a piece window by window, the first this long, when its listener would "
                     "otherwise wait for it (a silent listener's first piece, or one that would end after "
                     "the audio before it ran out); 0 renders every piece whole (docs/BENCHMARKS.md)."),
    ] = 500,  # vocoder.FIRST_WINDOW_S (not imported: --help stays fast)
    wyoming_port: Annotated[
        int | None,
        typer.Option("--wyoming-port", help="Also serve the Wyoming protocol (Home Assistant) on this port, e.g. 10200."),
    ] = None,
    lexicon: Annotated[
        list[Path] | None,
        typer.Option("--lexicon", envvar="VOICESTREAM_LEXICON", exists=True, dir_okay=False, metavar="FILE",
                     help="A pronunciation lexicon applied to every text before its G2P, in every language: "
                     "W3C PLS 1.0 (<lexeme> with <grapheme> and an IPA <phoneme> or an <alias>; its xml:lang "
                     "is its language) or a plain file of word<TAB>IPA lines (a '# language: es' line limits "
                     "the lines after it to that language). Repeatable; later files win (docs/PRONUNCIATION.md)."),
    ] = None,
    sequential: Annotated[
        bool,
        typer.Option("--sequential", help="Answer a session's messages strictly one after another (the reference "
                     "design, for comparison); by default later messages render while earlier ones are sent."),
    ] = False,
) -> None:
    """Run the speech server (the SageMaker container contract); SIGTERM drains it."""
    from dataclasses import replace

    from voicestream.access import parse_names
    from voicestream.engine.phonemes import load_vocab
    from voicestream.engine.silence import DEFAULT_PAUSES
    from voicestream.logs import configure_logging
    from voicestream.server import ServerSettings
    from voicestream.server import serve as run_server
    from voicestream.speech.settings import read_lexicons
    from voicestream.text.lexicon import LexiconError

    configure_logging(log_level, json=log_json)
    lexicons = tuple(lexicon or ())
    try:
        read_lexicons(lexicons).check(load_vocab())
    except LexiconError as error:
        raise typer.BadParameter(error.message, param_hint="--lexicon") from None
    settings = ServerSettings(
        host=host, port=port, device=device, model_dir=model_dir, variant=variant, max_sessions=max_sessions,
        max_queue=max_queue, max_session_requests=max_session_requests, max_body_bytes=max_body_bytes,
        idle_timeout_s=idle_timeout, stale_after_s=stale_after, grace_s=grace_s, api_key=api_key or None,
        listener_budget_bytes=listener_budget_bytes, buffer_budget_bytes=buffer_budget_bytes,
        max_session_errors=max_session_errors, send_timeout_s=send_timeout, send_buffer_bytes=send_buffer_bytes,
        max_whole_files=max_whole_files,
        cors_origins=tuple(cors_origin or ()), allowed_hosts=parse_names(allowed_host), pipelined=not sequential,
        pauses=replace(
            DEFAULT_PAUSES,
            **({"leading_s": leading_silence_ms / 1000} if leading_silence_ms is not None else {}),
            **({"sentence_s": sentence_pause_ms / 1000} if sentence_pause_ms is not None else {}),
        ),
        first_window_s=first_window_ms / 1000,
        wyoming_port=wyoming_port,
        lexicons=lexicons,
    )
    run_server(settings, log_level=log_level)
