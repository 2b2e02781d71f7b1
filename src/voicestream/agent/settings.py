"""The agent's settings: one frozen object, filled from the CLI or the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from strands.models import Model

from voicestream.access import parse_names
from voicestream.agent.conversation import ConversationLimits
from voicestream.agent.llm import DEFAULT_MAX_TOKENS, create_model
from voicestream.agent.local_llm import DEFAULT_LOCAL_THREADS
from voicestream.agent.runtime import (
    DEFAULT_CHUNK_SENTENCES,
    DEFAULT_FIRST_CLAUSE_WORDS,
    AnswerLimits,
)
from voicestream.text import ChunkSchedule

DEFAULT_SPEECH_URL = "ws://127.0.0.1:8080/invocations-bidirectional-stream"


DEFAULT_GREETING = "Hello, how can I help?"
DEFAULT_DTMF_TEMPLATE = "The caller pressed {digits}."


@dataclass(frozen=True, slots=True)
class TelephonySettings:
    """The phone carriers' routes (`voicestream.agent.telephony`): each carrier's secret
    (None: its routes answer 404, unless `insecure`), the agent's public base URL (what the
    carriers reach it by, behind a proxy; None: the request's own Host), the greeting spoken
    when a call connects (empty: none) and the user turn a key press becomes."""

    public_url: str | None = None
    twilio_auth_token: str | None = None
    telnyx_public_key: str | None = None
    plivo_auth_token: str | None = None
    vonage_signature_secret: str | None = None
    insecure: bool = False
    """Serve a carrier without its secret, unchecked (local testing only)."""
    greeting: str = DEFAULT_GREETING
    dtmf_template: str = DEFAULT_DTMF_TEMPLATE

    def __post_init__(self) -> None:
        if self.public_url is not None and not self.public_url.startswith(("https://", "http://")):
            raise ValueError(f"the public URL must be http(s)://HOST, not {self.public_url!r}")
        try:
            self.dtmf_template.format(digits="1")
        except (KeyError, IndexError, ValueError) as error:
            raise ValueError(f"the DTMF template may name only {{digits}}: {error}") from None

    @classmethod
    def from_env(cls, env: Mapping[str, str], **overrides: Any) -> TelephonySettings:
        """From VOICESTREAM_PUBLIC_URL, TWILIO_AUTH_TOKEN, TELNYX_PUBLIC_KEY, PLIVO_AUTH_TOKEN,
        VONAGE_SIGNATURE_SECRET, VOICESTREAM_GREETING and VOICESTREAM_DTMF_TEMPLATE; `overrides`
        that are not None win."""
        settings = cls(
            public_url=env.get("VOICESTREAM_PUBLIC_URL") or None,
            twilio_auth_token=env.get("TWILIO_AUTH_TOKEN") or None,
            telnyx_public_key=env.get("TELNYX_PUBLIC_KEY") or None,
            plivo_auth_token=env.get("PLIVO_AUTH_TOKEN") or None,
            vonage_signature_secret=env.get("VONAGE_SIGNATURE_SECRET") or None,
            greeting=env.get("VOICESTREAM_GREETING", DEFAULT_GREETING),
            dtmf_template=env.get("VOICESTREAM_DTMF_TEMPLATE") or DEFAULT_DTMF_TEMPLATE,
        )
        return replace(settings, **{k: v for k, v in overrides.items() if v is not None})


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """Where the speech server is and which LLM answers.

    `speech_url` names the speech server: its WebSocket session URL or base URL, or
    `sagemaker://ENDPOINT_NAME` for a SageMaker endpoint (see `speech_transport`).
    `model` is the provider's model name (a Bedrock model id, an OpenAI model name, or for
    `local` the path of another GGUF file); `base_url` is an OpenAI-compatible server's URL;
    `region` the AWS region for Bedrock; `llm_threads` the CPU threads of the local model;
    `first_clause_words` sets bidi's short first chunk (latency mode), None (0 in the
    environment) turns it off; `chunk_sentences` how many sentences each later chunk holds
    (see `ChunkSchedule`); `asr_model` is the Whisper model of voice input, a directory or
    Hugging Face id (None: `speech_input.default_asr_model`); `turn_model` is Smart Turn
    v3's ONNX file for `semantic_vad` (None: the one in an installed pipecat-ai, see
    `realtime.end_of_turn`), `turn_text_model` the GGUF chat model that judges its words
    (None: the local LLM's SmolLM2; "off": none, punctuation judges). `api_key`, `cors_origins` and
    `allowed_hosts` are the agent's own access policy (`voicestream.access`);
    `speech_api_key` is the key the agent sends to the speech server (as a header);
    `conversations` bound what is remembered of each conversation (see
    `ConversationLimits`); `telephony` the phone carriers' routes (see
    `TelephonySettings`).
    """

    speech_url: str = DEFAULT_SPEECH_URL
    llm: str = "local"
    model: str | None = None
    base_url: str | None = None
    region: str | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    llm_threads: int = DEFAULT_LOCAL_THREADS
    first_clause_words: int | None = DEFAULT_FIRST_CLAUSE_WORDS
    chunk_sentences: tuple[int, ...] = DEFAULT_CHUNK_SENTENCES
    limits: AnswerLimits = field(default_factory=AnswerLimits)
    api_key: str | None = None
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    speech_api_key: str | None = None
    asr_model: str | None = None
    turn_model: str | None = None
    turn_text_model: str | None = None
    conversations: ConversationLimits = field(default_factory=ConversationLimits)
    telephony: TelephonySettings = field(default_factory=TelephonySettings)

    def __post_init__(self) -> None:
        self.schedule  # noqa: B018 - a bad schedule fails when the settings are made

    @property
    def schedule(self) -> ChunkSchedule:
        return ChunkSchedule(self.first_clause_words or None, self.chunk_sentences)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> AgentSettings:
        """Settings from VOICESTREAM_SPEECH_URL, VOICESTREAM_LLM (local, openai or bedrock),
        VOICESTREAM_LLM_MODEL, VOICESTREAM_LLM_BASE_URL, VOICESTREAM_LLM_MAX_TOKENS,
        VOICESTREAM_LLM_THREADS, VOICESTREAM_FIRST_CLAUSE_WORDS, VOICESTREAM_CHUNK_SCHEDULE
        (sentences per later chunk, such as "1,2"), AWS_REGION (or AWS_DEFAULT_REGION), the
        limits' variables (see `AnswerLimits.from_env`), the conversations' bounds (see
        `ConversationLimits.from_env`), VOICESTREAM_API_KEY,
        VOICESTREAM_CORS_ORIGINS and VOICESTREAM_ALLOWED_HOSTS (comma-separated),
        VOICESTREAM_SPEECH_API_KEY, VOICESTREAM_ASR_MODEL, VOICESTREAM_TURN_MODEL and the
        telephony variables (see `TelephonySettings.from_env`); `overrides`
        that are not None win (CLI options; 0 first clause words turns latency mode off there
        too)."""
        env = os.environ if environ is None else environ
        max_tokens = env.get("VOICESTREAM_LLM_MAX_TOKENS")
        threads = env.get("VOICESTREAM_LLM_THREADS")
        clause_words = env.get("VOICESTREAM_FIRST_CLAUSE_WORDS")
        chunk_schedule = env.get("VOICESTREAM_CHUNK_SCHEDULE")
        settings = cls(
            speech_url=env.get("VOICESTREAM_SPEECH_URL") or DEFAULT_SPEECH_URL,
            llm=env.get("VOICESTREAM_LLM") or "local",
            model=env.get("VOICESTREAM_LLM_MODEL") or None,
            base_url=env.get("VOICESTREAM_LLM_BASE_URL") or None,
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
            max_tokens=int(max_tokens) if max_tokens else DEFAULT_MAX_TOKENS,
            llm_threads=int(threads) if threads else DEFAULT_LOCAL_THREADS,
            first_clause_words=(
                int(clause_words) or None if clause_words else DEFAULT_FIRST_CLAUSE_WORDS
            ),
            chunk_sentences=(
                ChunkSchedule.parse(None, chunk_schedule).sentences
                if chunk_schedule
                else DEFAULT_CHUNK_SENTENCES
            ),
            limits=AnswerLimits.from_env(env),
            conversations=ConversationLimits.from_env(env),
            api_key=env.get("VOICESTREAM_API_KEY") or None,
            cors_origins=parse_names([env.get("VOICESTREAM_CORS_ORIGINS", "")]),
            allowed_hosts=parse_names([env.get("VOICESTREAM_ALLOWED_HOSTS", "")]),
            speech_api_key=env.get("VOICESTREAM_SPEECH_API_KEY") or None,
            asr_model=env.get("VOICESTREAM_ASR_MODEL") or None,
            turn_model=env.get("VOICESTREAM_TURN_MODEL") or None,
            turn_text_model=env.get("VOICESTREAM_TURN_TEXT_MODEL") or None,
            telephony=TelephonySettings.from_env(env),
        )
        chosen = {k: v for k, v in overrides.items() if v is not None}
        if chosen.get("first_clause_words") == 0:
            chosen["first_clause_words"] = None
        return replace(settings, **chosen)

    def create_model(self) -> Model:
        """The LLM these settings name; raises `LLMConfigError` (or `LocalModelError`)."""
        local_options = {"n_threads": self.llm_threads} if self.llm == "local" else {}
        return create_model(
            self.llm,
            model=self.model,
            base_url=self.base_url,
            region=self.region,
            max_tokens=self.max_tokens,
            **local_options,
        )
