"""Shared fixtures, loaded once per run: the real Kokoro engine, the real Whisper model, a
speech server, the local LLM (SmolLM2 through llama.cpp) and the agent app served by uvicorn
on loopback in front of that speech server (the agent and web tests use them)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator

os.environ.setdefault("VOICESTREAM_OFFLINE", "1")  # tests never reach the model hub
# Bytecode is cached, whatever PYTHONDONTWRITEBYTECODE says (it is set on the CI machines): each
# test worker and each `voicestream serve` or CLI subprocess otherwise compiles every module it
# imports from source (about 5 s of CPU to collect the suite). pyproject's compile-bytecode
# does the same for the installed packages.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

from typing import TYPE_CHECKING

import pytest
from tests.replaying import ReplayingEngine

from voicestream.engine import KokoroEngine
from voicestream.engine.vocoder import FIRST_WINDOW_S
from voicestream.server import ServerSettings, free_port, running_server

if TYPE_CHECKING:  # the agent's modules load only for the tests that use them
    from bedrock_agentcore.runtime import BedrockAgentCoreApp

    from voicestream.agent.local_llm import LocalLlamaModel


pytest_plugins = ["tests.cpu_profile"]  # --cpu-durations=N

MAX_TEST_WORKERS = 4
"""Each pytest-xdist worker loads its own engine, Whisper and LLM (2 to 3 GB of memory): on a
large machine more than four would spend memory and start-up time for little more speed."""


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject's addopts): one worker per core, two at least, four at most. Two on
    one core still pays: much of the suite waits on sockets, browsers and subprocesses."""
    return max(2, min(MAX_TEST_WORKERS, len(os.sched_getaffinity(0))))


SLOW_FOLDERS_FIRST = ("web", "bench", "deploy", "agent", "infra", "engine", "server", "client", "text")
"""Folders by how long their files take (a browser playing answers, the benches, servers behind
haproxy, the LLM, CDK synths, renders): run in this order, the quick pure-layer folders last, so
that the workers' last files are short ones and both finish together rather than one waiting
while the other plays a page. tests/text comes before the rest: its linearity file (about 25 s)
was the run's last file, on one worker while the other had finished (stop 50's log). pyproject's addopts keep xdist from reordering files by test
count (--no-loadscope-reorder), which would put these few-test files last."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def folder_rank(item: pytest.Item) -> int:
        folder = item.path.relative_to(config.rootpath / "tests").parts[0]  # a file for tests/test_*.py
        return SLOW_FOLDERS_FIRST.index(folder) if folder in SLOW_FOLDERS_FIRST else len(SLOW_FOLDERS_FIRST)

    items.sort(key=folder_rank)  # stable: the order inside a rank is pytest's


ONE_WORKER_FOLDERS = ("infra",)
"""Folders whose files all run on one worker: the first CDK synth in a worker starts jsii's
Node.js runtime and loads the CDK's assembly (about 10 s of CPU); with the folder's files on
both workers that was paid twice (perf: the second worker's runtime, 9.5 s of CPU)."""


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadfile`` (pyproject's addopts), but each of `ONE_WORKER_FOLDERS` is one
    unit of work instead of one per file; any other ``--dist`` is xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FilesAndFolders(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            parts = path.split("/")
            if len(parts) > 2 and parts[0] == "tests" and parts[1] in ONE_WORKER_FOLDERS:
                return "/".join(parts[:2])
            return path

    return FilesAndFolders(config, log)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def engine() -> KokoroEngine:
    return KokoroEngine.load()


@pytest.fixture
def windowed(engine: KokoroEngine) -> Iterator[KokoroEngine]:
    """The session's engine with the first window on (``--first-window-ms 500``, the default)."""
    engine.first_window_s, saved = FIRST_WINDOW_S, engine.first_window_s
    try:
        yield engine
    finally:
        engine.first_window_s = saved


@pytest.fixture
def whole_pieces(engine: KokoroEngine) -> Iterator[KokoroEngine]:
    """The session's engine with the first window off (``--first-window-ms 0``): every piece whole."""
    engine.first_window_s, saved = 0.0, engine.first_window_s
    try:
        yield engine
    finally:
        engine.first_window_s = saved


@pytest.fixture
def windowed_replays(windowed: KokoroEngine, replaying_engine: ReplayingEngine) -> ReplayingEngine:
    """`windowed`, its pieces replayed once rendered (`tests.replaying`): for tests of what
    the scheduler does with the parts (their order, hand-over, threads asked), not of the
    render. A replayed part ignores a thread count sent in; tests of that take `windowed`."""
    return replaying_engine


@pytest.fixture(scope="session")
def whisper():
    from voicestream.agent.speech_input import default_asr_model, load_whisper

    return load_whisper(default_asr_model())


@pytest.fixture(scope="session")
def replaying_engine(engine: KokoroEngine) -> ReplayingEngine:
    """The session's engine, each piece rendered once and replayed after (`tests.replaying`)."""
    return ReplayingEngine(engine)


@pytest.fixture(scope="session")
def speech_server(replaying_engine: ReplayingEngine) -> Iterator[str]:
    """A real speech server on 127.0.0.1 sharing the session's engine, its pieces replayed once
    rendered (`tests.replaying`: for tests of the protocol around a render); yields its base
    URL. A test whose feature is the render's time takes `rendering_speech_server`."""
    with running_server(replaying_engine) as url:  # type: ignore[arg-type]
        yield url


@pytest.fixture(scope="session")
def rendering_speech_server(engine: KokoroEngine) -> Iterator[str]:
    """A real speech server on 127.0.0.1 that renders every piece on the session's engine."""
    with running_server(engine) as url:
        yield url


@contextlib.contextmanager
def _server_maker(engine: KokoroEngine | ReplayingEngine) -> Iterator[Callable[..., str]]:
    with contextlib.ExitStack() as stack:

        def start(**overrides: object) -> str:
            settings = ServerSettings(host="127.0.0.1", port=free_port(), **overrides)  # type: ignore[arg-type]
            return stack.enter_context(running_server(engine, settings))  # type: ignore[arg-type]

        yield start


@pytest.fixture
def make_speech_server(replaying_engine: ReplayingEngine) -> Iterator[Callable[..., str]]:
    """Start extra servers with custom settings (limits, timeouts), their pieces replayed as
    `speech_server`'s are; all stop after the test."""
    with _server_maker(replaying_engine) as start:
        yield start


@pytest.fixture
def make_rendering_speech_server(engine: KokoroEngine) -> Iterator[Callable[..., str]]:
    """`make_speech_server` with every piece rendered."""
    with _server_maker(engine) as start:
        yield start


TEST_MAX_TOKENS = 20
"""Short answers (a sentence, about 15 words) keep the agent and page tests quick; the
tests that need a longer answer ask `long_winded_llm`, the pipelining test a scripted one."""
TEST_THREADS = 1
"""The speech engine, Whisper and the LLM share the test machine's few cores: a single LLM
thread never spins waiting for a second one that the others have pushed off its core."""


@pytest.fixture(scope="session")
def local_llm() -> LocalLlamaModel:
    from voicestream.agent.llm import create_model
    from voicestream.agent.local_llm import LocalLlamaModel

    model = create_model("local", max_tokens=TEST_MAX_TOKENS, n_threads=TEST_THREADS)
    assert isinstance(model, LocalLlamaModel)
    model.load()
    return model


@pytest.fixture(scope="session")
def agent_app(speech_server: str, local_llm: LocalLlamaModel) -> BedrockAgentCoreApp:
    from voicestream.agent.app import AgentSettings, create_app

    return create_app(AgentSettings(speech_url=speech_server), llm=local_llm)


@pytest.fixture(scope="session")
def agent_url(agent_app: BedrockAgentCoreApp) -> Iterator[str]:
    from voicestream.agent.app import running_agent

    with running_agent(agent_app) as url:
        yield url


LONG_WINDED_SEED = 7
"""Unseeded, the model's answer depends on how many answers the worker drew before it, and a
draw can end a "very long story" after a sentence: a clean clone's did, and the test waiting
for the answer to fill its queue waited out its timeout. Seeded, each prompt gets one answer
(this seed's story: hundreds of tokens)."""


@pytest.fixture
def long_winded_llm(local_llm: LocalLlamaModel) -> Iterator[LocalLlamaModel]:
    """The local model allowed answers far longer than a test may take, seeded."""
    saved = local_llm.get_config()["max_tokens"], local_llm.get_config().get("seed")
    local_llm.update_config(max_tokens=4000, seed=LONG_WINDED_SEED)
    yield local_llm
    local_llm.update_config(max_tokens=saved[0], seed=saved[1])
