"""``voicestream bench ...``: the measurements of docs/BENCHMARKS.md.

Every bench prints its tables on stdout (Markdown, ready for docs/BENCHMARKS.md), shows a
progress bar on stderr, and takes ``--json FILE`` and ``--plot FILE`` (PNG).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

from voicestream.bench.texts import AGENT_PROMPT
from voicestream.cli.app import Device, ModelDir, app, load_engine
from voicestream.cli.progress import stderr

bench_app = typer.Typer(
    help="Measurements for docs/BENCHMARKS.md: tables on stdout, --json FILE, --plot FILE (PNG).", no_args_is_help=True
)
app.add_typer(bench_app, name="bench")
Trials = Annotated[int, typer.Option("--trials", min=1, help="Repetitions of each measurement.")]
JsonFile = Annotated[Path | None, typer.Option("--json", help="Also write the results as JSON to this file.")]
PlotFile = Annotated[Path | None, typer.Option("--plot", help="Also draw the results as a PNG chart in this file.")]


@bench_app.command("rtf")
def bench_rtf(
    trials: Trials = 3,
    threads: Annotated[
        list[int], typer.Option("--threads", min=1, help="ONNX Runtime threads per model run (repeatable).")
    ] = [1, 2],  # noqa: B006 - typer reads the default
    model_dir: ModelDir = None,
    json_file: JsonFile = None,
    plot_file: PlotFile = None,
) -> None:
    """Engine real-time factor by input length and thread count (fp32/fp16 on CUDA when there is a GPU)."""
    from voicestream.bench.report import publish
    from voicestream.bench.rtf import measure_rtf

    files = load_engine(model_dir, warm_up=False).files
    publish(measure_rtf(files, threads, trials, model_dir=model_dir), json_file, plot_file)


@bench_app.command("ort")
def bench_ort(trials: Trials = 7, model_dir: ModelDir = None, json_file: JsonFile = None, plot_file: PlotFile = None) -> None:
    """ONNX Runtime session settings one at a time (spinning, arena, optimization level,
    a pre-optimized graph, and on a VNNI CPU the model's own ConvInteger instead of the
    engine's matrix products): load time, run time and CPU time against the shipped ones."""
    from voicestream.bench.ort_settings import measure_ort_settings
    from voicestream.bench.report import publish

    publish(measure_ort_settings(load_engine(model_dir), trials), json_file, plot_file)


@bench_app.command("words")
def bench_words(
    language: Annotated[
        list[str], typer.Option("--language", help="Languages to measure (repeatable); every language by default.")
    ] = [],  # noqa: B006 - typer reads the default
    cuts: Annotated[int, typer.Option("--cuts", min=1, help="Cut tests per language.")] = 12,
    model_dir: ModelDir = None,
    json_file: JsonFile = None,
    plot_file: PlotFile = None,
) -> None:
    """Word timestamps per language: cut-test pass rate and start error against Whisper."""
    from voicestream.bench.report import publish
    from voicestream.bench.texts import WORD_SENTENCES
    from voicestream.bench.words import measure_words

    languages = language or list(WORD_SENTENCES)
    publish(measure_words(load_engine(model_dir), languages, cuts), json_file, plot_file)


@bench_app.command("transport")
def bench_transport(
    trials: Trials = 5, model_dir: ModelDir = None, device: Device = "cpu", json_file: JsonFile = None,
    plot_file: PlotFile = None,
) -> None:
    """First audio over the bidirectional session: block vs first sentence, pipelined vs sequential,
    latency vs sentence mode (with WER), the reference's three sentences, contention; each
    streaming face (session, Cartesia, ElevenLabs, Deepgram) fed word by word: first audio, bytes per second;
    and long answers at once: each listener's silence, the renders' pace and the silence it forces."""
    from voicestream.bench.report import publish
    from voicestream.bench.transport import measure_transport

    publish(measure_transport(load_engine(model_dir, device), trials), json_file, plot_file)


@bench_app.command("encoding")
def bench_encoding(model_dir: ModelDir = None, json_file: JsonFile = None, plot_file: PlotFile = None) -> None:
    """24 clips as raw PCM, MP3, AAC (fMP4) and Opus: bytes, base64 bytes, bit rate, WER (Whisper tiny.en)."""
    from voicestream.bench.encoding import measure_encoding
    from voicestream.bench.report import publish

    publish(measure_encoding(load_engine(model_dir)), json_file, plot_file)


@bench_app.command("framing")
def bench_framing(
    trials: Annotated[int, typer.Option("--trials", min=1, help="Random seeds per re-chunking plan.")] = 5,
    seed: Annotated[int, typer.Option(help="The first seed of the re-chunking.")] = 1,
    model_dir: ModelDir = None,
    json_file: JsonFile = None,
    plot_file: PlotFile = None,
) -> None:
    """SSE relay of MP3 re-chunked at random: events split across deliveries, buffered vs naive decoder."""
    from voicestream.bench.framing import measure_framing
    from voicestream.bench.report import publish

    publish(measure_framing(load_engine(model_dir), trials=trials, seed=seed), json_file, plot_file)


@bench_app.command("load")
def bench_load(
    sessions: Annotated[
        list[int], typer.Option("--sessions", min=1, help="Concurrent sessions per step of the ladder (repeatable).")
    ] = [1, 2, 4, 8, 16],  # noqa: B006 - typer reads the default
    rounds: Annotated[int, typer.Option(min=1, help="Requests each session makes, one after another.")] = 2,
    target_ms: Annotated[float, typer.Option("--target-ms", help="The p95 first-audio target of the capacity.")] = 2000.0,
    max_sessions: Annotated[int, typer.Option("--max-sessions", help="The server's session limit (beyond: busy).")] = 64,
    model_dir: ModelDir = None,
    json_file: JsonFile = None,
    plot_file: PlotFile = None,
) -> None:
    """Closed-loop ladder of concurrent sessions: p50/p95 first audio, RTF, errors, busy, capacity."""
    from voicestream.bench.load import measure_load
    from voicestream.bench.report import publish

    report = measure_load(load_engine(model_dir), sessions, rounds, target_ms, max_sessions=max_sessions)
    publish(report, json_file, plot_file)


@bench_app.command("library")
def bench_library(
    trials: Trials = 5, model_dir: ModelDir = None, json_file: JsonFile = None, plot_file: PlotFile = None
) -> None:
    """First audio of an idle voicestream server against kokoro-onnx's create_stream, same model and voice."""
    from voicestream.bench.library import measure_library
    from voicestream.bench.report import publish

    publish(measure_library(load_engine(model_dir), trials), json_file, plot_file)


@bench_app.command("chaos")
def bench_chaos(
    sessions: Annotated[int, typer.Option(min=1, help="Concurrent sessions of the soak.")] = 32,
    duration: Annotated[float, typer.Option(min=1, help="Seconds the soak lasts.")] = 120.0,
    fuzz_sessions: Annotated[int, typer.Option("--fuzz-sessions", min=1, help="Concurrent fuzzed sessions.")] = 8,
    fuzz_messages: Annotated[int, typer.Option("--fuzz-messages", min=1, help="Messages per fuzzed session.")] = 30,
    seed: Annotated[int, typer.Option(help="Seed of the fuzzed messages.")] = 1,
    json_file: JsonFile = None,
    model_dir: ModelDir = None,
) -> None:
    """Fuzz, faults and a soak against a `voicestream serve` process on 127.0.0.1, then SIGTERM."""
    import asyncio
    import json

    from voicestream.bench.chaos import run_chaos

    serve_args = ["--model-dir", str(model_dir)] if model_dir else []
    stderr.print(f"Fuzz ({fuzz_sessions} sessions), faults, then a {duration:g} s soak of {sessions} sessions...")
    result = asyncio.run(run_chaos(sessions, duration, fuzz_sessions, fuzz_messages, seed, serve_args))
    typer.echo(result.tables())
    if json_file:
        json_file.write_text(json.dumps(result.as_json(), indent=1))


@bench_app.command("e2e")
def bench_e2e(
    trials: Trials = 2,
    prompt: Annotated[str, typer.Option(help="The prompt every mode answers.")] = AGENT_PROMPT,
    wer: Annotated[bool, typer.Option("--wer/--no-wer", help="Score the spoken answers with Whisper tiny.en.")] = True,
    modes: Annotated[bool, typer.Option("--modes/--no-modes", help="Measure bidi, batch and batch-stream.")] = True,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Cap on each answer's tokens.")] = 120,
    model_dir: ModelDir = None,
    json_file: JsonFile = None,
    plot_file: PlotFile = None,
) -> None:
    """The pipeline end to end: bidi vs batch vs batch-stream, and latency mode vs sentence mode."""
    from voicestream.bench.e2e import measure_e2e, whisper_transcriber
    from voicestream.bench.report import publish
    from voicestream.protocol import AGENT_MODES

    engine = load_engine(model_dir)
    with whisper_transcriber() if wer else contextlib.nullcontext() as transcribe:
        report = measure_e2e(
            engine, prompt, trials, transcribe=transcribe, modes=AGENT_MODES if modes else (), max_tokens=max_tokens
        )
    publish(report.to_report(), json_file, plot_file)


@bench_app.command("voice")
def bench_voice(
    questions: Annotated[int, typer.Option("--questions", min=1, max=5, help="Spoken questions answered.")] = 5,
    barge_ins: Annotated[
        int, typer.Option("--barge-ins", min=0, max=4, help="Answers spoken over by the next question.")
    ] = 3,
    hesitations: Annotated[
        int, typer.Option("--hesitations", min=0, max=5, help="Questions with a 600-900 ms pause inside.")
    ] = 5,
    turn_detection: Annotated[
        str, typer.Option("--turn-detection", help="The turn detections to measure, a session each, comma-separated.")
    ] = "semantic_vad,server_vad",
    silence_ms: Annotated[
        int, typer.Option("--silence-ms", min=0, help="The server VAD's silence_duration_ms (ends a turn).")
    ] = 500,
    wer: Annotated[bool, typer.Option("--wer/--no-wer", help="Score the spoken answers with Whisper tiny.en.")] = True,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Cap on each answer's tokens.")] = 60,
    model_dir: ModelDir = None,
    json_file: JsonFile = None,
    plot_file: PlotFile = None,
) -> None:
    """Spoken questions streamed in real time into the agent's /v1/realtime (local LLM), with
    semantic_vad and server_vad: voice to voice and its stages (p50/p95), cut-ins on hesitant
    questions, barge-in reaction, the answers' WER."""
    from voicestream.bench.e2e import whisper_transcriber
    from voicestream.bench.report import publish
    from voicestream.bench.voice import (
        DETECTIONS,
        HESITATIONS,
        INTERRUPTIONS,
        QUESTIONS,
        measure_voice,
    )

    detections = [name.strip() for name in turn_detection.split(",") if name.strip()]
    if not detections or set(detections) - set(DETECTIONS):
        raise typer.BadParameter(f"choose from {', '.join(DETECTIONS)}", param_hint="--turn-detection")
    engine = load_engine(model_dir)
    with whisper_transcriber() if wer else contextlib.nullcontext() as transcribe:
        report = measure_voice(
            engine, QUESTIONS[:questions], INTERRUPTIONS[:barge_ins], transcribe=transcribe,
            max_tokens=max_tokens, silence_ms=silence_ms, detections=detections,
            hesitations=HESITATIONS[:hesitations],
        )
    publish(report.to_report(), json_file, plot_file)


@bench_app.command("telephony")
def bench_telephony(
    questions: Annotated[
        int, typer.Option("--questions", min=1, max=5, help="Spoken questions asked over the call and over /v1/realtime.")
    ] = 5,
    calls: Annotated[
        int, typer.Option("--calls", min=0, max=50, help="Calls that only send silence, for the agent's CPU (0: none).")
    ] = 10,
    window_s: Annotated[
        float, typer.Option("--window-s", min=1.0, max=300.0, help="How long the silent calls' CPU is measured.")
    ] = 10.0,
    barge_in: Annotated[
        bool, typer.Option("--barge-in/--no-barge-in", help="Speak over an answer on the call.")
    ] = True,
    llm: Annotated[
        str, typer.Option("--llm", help="local: SmolLM2 as `voicestream agent` runs it; echo: answers at once "
                          "(the audio path alone).")
    ] = "local",
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Cap on each answer's tokens.")] = 60,
    asr_model: Annotated[
        str | None, typer.Option("--asr-model", help="The agent's Whisper model, as `voicestream agent --asr-model` "
                                 "takes it (default: the agent's own, tiny.en offline); `whisper-base`: the offline "
                                 "multilingual Whisper base of the bench extra.")
    ] = None,
    model_dir: ModelDir = None,
    json_file: JsonFile = None,
    plot_file: PlotFile = None,
) -> None:
    """A phone call over a stand-in Twilio (Media Streams, mu-law at 8 kHz) against the same
    questions over /v1/realtime in pcm16: voice to voice and its ratio, barge-in to `clear` and
    the truncation's error, the questions' WER as the agent heard them on each, and the
    agent's CPU for calls that only send silence."""
    from voicestream.bench.report import publish
    from voicestream.bench.telephony import LLMS, measure_telephony
    from voicestream.bench.voice import QUESTIONS

    if llm not in LLMS:
        raise typer.BadParameter(f"choose from {', '.join(LLMS)}", param_hint="--llm")
    report = measure_telephony(
        load_engine(model_dir), QUESTIONS[:questions], calls=calls, llm=llm, max_tokens=max_tokens,
        window_s=window_s, barge_in=barge_in, asr_model=_asr_model(asr_model),
    )
    publish(report.to_report(), json_file, plot_file)


@bench_app.command("page")
def bench_page(
    trials: Trials = 5,
    start_buffer_ms: Annotated[
        str, typer.Option("--start-buffer-ms", help="The player's start buffers to measure, in ms, comma-separated.")
    ] = "0",
    first_window_ms: Annotated[
        str, typer.Option("--first-window-ms", help="The speech server's first vocoder windows to compare, in ms, "
                          "comma-separated (serve --first-window-ms; 0 renders the first piece whole).")
    ] = "500,0",
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Cap on each answer's tokens.")] = 120,
    model_dir: ModelDir = None,
    json_file: JsonFile = None,
    plot_file: PlotFile = None,
) -> None:
    """The agent page's first sound after the click, heard in Chromium, per first vocoder window and
    player start buffer."""
    from voicestream.bench.page import BrowserUnavailable, measure_page
    from voicestream.bench.report import publish

    buffers = _milliseconds(start_buffer_ms, "--start-buffer-ms")
    windows = _milliseconds(first_window_ms, "--first-window-ms")
    engine = load_engine(model_dir)
    try:
        report = measure_page(engine, buffers, trials, max_tokens=max_tokens, first_windows_ms=windows)
    except BrowserUnavailable as missing:
        stderr.print(f"[red]error:[/red] {missing}")
        raise typer.Exit(2) from None
    publish(report.to_report(), json_file, plot_file)


def _asr_model(name: str | None) -> str | None:
    """`--asr-model` as the agent takes it; `whisper-base` is the dev group's offline Whisper base."""
    if name != "whisper-base":
        return name
    from voicestream.bench.asr import whisper_base_dir

    try:
        return str(whisper_base_dir())
    except ModuleNotFoundError as error:
        raise typer.BadParameter(f"Whisper base needs {error.name} (the dev group)", param_hint="--asr-model") from None


def _milliseconds(values: str, option: str) -> list[int]:
    """A comma-separated list of whole milliseconds, 0 or more, at least one."""
    try:
        parsed = [int(value) for value in values.split(",") if value.strip()]
    except ValueError:
        raise typer.BadParameter("whole numbers of ms, e.g. 0,40,80", param_hint=option) from None
    if not parsed or min(parsed) < 0:
        raise typer.BadParameter("one or more values of 0 ms or more", param_hint=option)
    return parsed


@bench_app.command("gpu")
def bench_gpu(
    device: Device = "cuda",
    variants: Annotated[
        list[str], typer.Option("--variant", help="Model variants to measure (repeatable): fp16, fp32, int8.")
    ] = ["fp16", "fp32"],  # noqa: B006 - typer reads the default
    sessions: Annotated[
        list[int], typer.Option("--sessions", min=1, help="Concurrent sessions per step of the ladder (repeatable).")
    ] = [1, 8, 32],  # noqa: B006 - typer reads the default
    rounds: Annotated[int, typer.Option(min=1, help="Requests each session makes, one after another.")] = 2,
    target_ms: Annotated[float, typer.Option("--target-ms", help="The p95 first-sound target of the capacity.")] = 300.0,
    allow_int8_cuda: Annotated[
        bool, typer.Option("--allow-int8-cuda", help="Measure int8 on CUDA anyway (its quantized ops run on the CPU).")
    ] = False,
    budget_s: Annotated[float, typer.Option("--budget-s", help="Skip ladder steps that would start after this.")] = 270.0,
    model_dir: ModelDir = None,
    json_file: JsonFile = None,
    plot_file: PlotFile = None,
) -> None:
    """fp16 and fp32 on CUDA in one run: node placement, engine RTF, the windowed path (a long first piece, whole and
    window by window), p50/p95 first audible sound at
    1, 8 and 32 sessions, sessions per GPU at a 300 ms p95. `--device cpu --variant int8` runs it on the CPU."""
    from voicestream.bench.gpu import BenchRefused, measure_gpu
    from voicestream.bench.report import publish

    try:
        report = measure_gpu(
            device, variants, sessions, rounds, target_ms, model_dir=model_dir, allow_int8_cuda=allow_int8_cuda,
            budget_s=budget_s,
        )
    except BenchRefused as refused:
        stderr.print(f"[red]error:[/red] {refused}")
        raise typer.Exit(2) from None
    publish(report, json_file, plot_file)


@bench_app.command("memory")
def bench_memory(
    sessions: Annotated[int, typer.Option(min=1, help="Concurrent sessions of the load.")] = 4,
    rounds: Annotated[int, typer.Option(min=1, help="Texts each session speaks, one after another.")] = 3,
    idle_s: Annotated[float, typer.Option("--idle-s", min=0, help="Seconds idle before each idle reading.")] = 10.0,
    trials: Trials = 5,
    adversarial: Annotated[
        bool, typer.Option("--adversarial/--no-adversarial", help="Add the adversarial texts of bench chaos to the load.")
    ] = True,
    env: Annotated[
        list[str], typer.Option("--env", help="KEY=VALUE for one more server, as shipped but with these (repeatable).")
    ] = [],  # noqa: B006 - typer reads the default
    model_dir: ModelDir = None,
    json_file: JsonFile = None,
    plot_file: PlotFile = None,
) -> None:
    """A `voicestream serve` process's memory idle, at its peak, after a load and after an idle spell,
    with the engine's idle release and session renewal on and off (and --env's variant), and the first
    request after idling."""
    from voicestream.bench.memory import CONFIGURATIONS, measure_memory
    from voicestream.bench.report import publish

    configurations = dict(CONFIGURATIONS)
    if env:
        extra = dict(pair.split("=", 1) for pair in env)
        configurations[" ".join(env)] = extra
    serve_args = ["--model-dir", str(model_dir)] if model_dir else []
    report = measure_memory(sessions, rounds, idle_s, trials, adversarial, serve_args=serve_args,
                            configurations=configurations)
    publish(report, json_file, plot_file)
