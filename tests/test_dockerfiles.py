"""The container contract, checked statically: no Docker engine is needed (or used) here.

docker/speech.Dockerfile is parsed with a small line parser (comments, backslash
continuations, heredocs, flags, exec form, ARG substitution in FROM) and held to what
SageMaker and docs/DEPLOY.md promise. Its entrypoint script is run for real with `sh`, a
stand-in `voicestream` and fake driver files, and the arguments it produces are parsed by
the real CLI. docker/compose.yaml and docker/agent.Dockerfile get lighter checks.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import typer
import yaml

from voicestream.cli.app import app as cli_app

REPO = Path(__file__).resolve().parent.parent
DOCKER = REPO / "docker"
SPEECH_DOCKERFILE = DOCKER / "speech.Dockerfile"
AGENT_DOCKERFILE = DOCKER / "agent.Dockerfile"
COMPOSE = DOCKER / "compose.yaml"

BIDI_LABEL = "com.amazonaws.sagemaker.capabilities.bidirectional-streaming"
SPEECH_URL = "ws://speech:8080/invocations-bidirectional-stream"
LOCAL_HOSTS = {"127.0.0.1", "localhost", "speech", "host", "agent"}
"""The only hosts a file under docker/ may name: loopback and the compose services."""


# --- a Dockerfile, parsed ------------------------------------------------------------------

_HEREDOC = re.compile(r"<<(-?)([\"']?)([A-Za-z_][A-Za-z0-9_]*)\2")
_VARIABLE = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}|\$(\w+)")


@dataclass(frozen=True)
class Instruction:
    line: int
    keyword: str
    flags: dict[str, str]
    args: str
    heredocs: dict[str, str]

    @property
    def exec_form(self) -> list[str] | None:
        if not self.args.startswith("["):
            return None
        value = json.loads(self.args)
        assert isinstance(value, list) and all(isinstance(v, str) for v in value), self
        return value


@dataclass
class Stage:
    base: str
    name: str | None
    platform: str | None = None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction | None:
        found = self.all(keyword)
        return found[-1] if found else None


@dataclass
class Dockerfile:
    text: str
    global_args: dict[str, str]
    stages: list[Stage]

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    def stage(self, name: str) -> Stage | None:
        return next((s for s in self.stages if s.name == name), None)

    def chain(self, stage: Stage) -> list[Stage]:
        """The stage, then the stage it is built FROM, and so on down to an image."""
        chain = [stage]
        while (parent := self.stage(substitute(chain[-1].base, self.global_args))) is not None:
            chain.append(parent)
        return chain

    def base_image(self, stage: Stage) -> str:
        return substitute(self.chain(stage)[-1].base, self.global_args)

    def env(self, stage: Stage) -> dict[str, str]:
        """ENV values in effect in a stage (inherited ones first, later ones win)."""
        values: dict[str, str] = {}
        for link in reversed(self.chain(stage)):
            for instruction in link.all("ENV"):
                values.update(_env_pairs(instruction.args))
        return values


def substitute(text: str, values: dict[str, str]) -> str:
    """Docker's (and compose's) `$VAR`, `${VAR}`, `${VAR:-default}` with `values` as the environment."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        if name in values and values[name] != "":
            return values[name]
        return match.group(2) or ""

    return _VARIABLE.sub(replace, text)


def _env_pairs(args: str) -> dict[str, str]:
    tokens = re.findall(r'(\w+)=("[^"]*"|\S+)', args)
    if tokens:
        return {key: value.strip('"') for key, value in tokens}
    key, _, value = args.partition(" ")
    return {key: value.strip()}


def parse_dockerfile(text: str) -> Dockerfile:
    lines = text.splitlines()
    instructions: list[Instruction] = []
    index = 0
    while index < len(lines):
        start = index + 1
        logical = lines[index]
        index += 1
        if not logical.strip() or logical.lstrip().startswith("#"):
            continue
        while logical.rstrip().endswith("\\") and index < len(lines):
            following = lines[index]
            index += 1
            if following.lstrip().startswith("#"):
                continue  # a comment inside a continued instruction is dropped
            logical = logical.rstrip()[:-1].rstrip() + " " + following.strip()
        heredocs: dict[str, str] = {}
        for match in _HEREDOC.finditer(logical):
            strip_tabs, name = match.group(1) == "-", match.group(3)
            body: list[str] = []
            while (
                index < len(lines)
                and (lines[index].lstrip("\t") if strip_tabs else lines[index]) != name
            ):
                body.append(lines[index])
                index += 1
            assert index < len(lines), f"heredoc {name} opened on line {start} is never closed"
            index += 1
            heredocs[name] = "\n".join(body) + "\n"
        keyword, _, rest = logical.strip().partition(" ")
        flags: dict[str, str] = {}
        rest = rest.strip()
        while rest.startswith("--"):
            token, _, rest = rest.partition(" ")
            name, _, value = token[2:].partition("=")
            flags[name] = value
            rest = rest.strip()
        instructions.append(Instruction(start, keyword.upper(), flags, rest, heredocs))

    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for instruction in instructions:
        if instruction.keyword == "FROM":
            words = instruction.args.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name, instruction.flags.get("platform")))
        elif not stages:
            assert instruction.keyword == "ARG", (
                f"line {instruction.line}: only ARG may come before FROM"
            )
            key, _, default = instruction.args.partition("=")
            global_args[key] = default
        else:
            stages[-1].instructions.append(instruction)
    return Dockerfile(text, global_args, stages)


def copy_sources(instruction: Instruction) -> list[str]:
    """The build-context paths a COPY or ADD takes (none for `--from` or a heredoc)."""
    if "from" in instruction.flags or instruction.heredocs:
        return []
    words = instruction.exec_form or instruction.args.split()
    return words[:-1]


def dockerignore_patterns() -> list[str]:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether `path` (relative to the repository root) or a folder above it is left out."""
    parts = Path(path).parts
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    for pattern in patterns:
        assert not pattern.startswith("!"), "exceptions in .dockerignore are not handled here"
        pattern = pattern.strip("/")
        for candidate in candidates:
            if fnmatch.fnmatchcase(candidate, pattern):
                return True
            if pattern.startswith("**/") and fnmatch.fnmatchcase(Path(candidate).name, pattern[3:]):
                return True
    return False


@pytest.fixture(scope="module")
def speech() -> Dockerfile:
    return parse_dockerfile(SPEECH_DOCKERFILE.read_text())


# --- the speech image -------------------------------------------------------------------


def test_parser_reads_continuations_heredocs_and_flags() -> None:
    parsed = parse_dockerfile(
        "# syntax=docker/dockerfile:1\nARG A=x\nFROM img:${A} AS one\n"
        "RUN --mount=type=cache,target=/c echo a \\\n    # dropped\n    && echo b\n"
        "COPY --chmod=0755 <<'EOF' /bin/s\n#!/bin/sh\necho $1\nEOF\nCMD [\"serve\"]\n"
    )
    stage = parsed.final
    assert parsed.base_image(stage) == "img:x"
    run, copy, cmd = stage.instructions
    assert run.flags == {"mount": "type=cache,target=/c"} and run.args == "echo a && echo b"
    assert copy.heredocs == {"EOF": "#!/bin/sh\necho $1\n"} and copy_sources(copy) == []
    assert cmd.exec_form == ["serve"]


def test_bidirectional_streaming_label_and_port(speech: Dockerfile) -> None:
    labels = " ".join(i.args for i in speech.final.all("LABEL"))
    assert re.search(rf"(^|\s){re.escape(BIDI_LABEL)}=\"?true\"?(\s|$)", labels)
    assert "8080" in " ".join(i.args for i in speech.final.all("EXPOSE")).split()


def test_final_stage_runs_as_a_user_that_is_not_root(speech: Dockerfile) -> None:
    user = speech.final.last("USER")
    assert user is not None, "the final stage sets no USER: the server would run as root"
    name = user.args.split(":")[0]
    assert name not in {"root", "0"}


def test_base_is_cuda_13_with_cudnn_runtime(speech: Dockerfile) -> None:
    """The locked onnxruntime-gpu links libcudart.so.13 and libcublas.so.13 and wants cuDNN 9:
    on a CUDA 12 image its CUDA provider fails to load and the server runs on the CPU."""
    image = speech.base_image(speech.final)
    assert image.startswith("nvidia/cuda:13."), image
    assert "cudnn" in image and "runtime" in image, image
    assert "onnxruntime-gpu" in (REPO / "uv.lock").read_text()


def test_cpu_flavor_is_python_312_slim(speech: Dockerfile) -> None:
    cpu = speech.stage("base-cpu")
    assert cpu is not None and speech.base_image(cpu) == "python:3.12-slim"
    assert speech.env(cpu)["VOICESTREAM_DEVICE"] == "cpu"
    assert speech.env(speech.stage("base-cuda"))["VOICESTREAM_DEVICE"] == "cuda"


def _uv_sync(speech: Dockerfile) -> list[Instruction]:
    runs = [i for stage in speech.stages for i in stage.all("RUN") if "uv sync" in i.args]
    assert runs, "no `uv sync` in the Dockerfile"
    return runs


def test_installs_from_the_lock_with_the_engine_and_cuda_extras(speech: Dockerfile) -> None:
    for run in _uv_sync(speech):
        assert re.search(r"--(locked|frozen)\b", run.args), run.args
        assert "--no-dev" in run.args, run.args
        assert "--extra engine" in run.args, run.args
        assert not re.search(r"--extra (agent|asr|infra|local-llm)\b|--all-extras", run.args), run.args
        assert "--extra cuda" in run.args, run.args
        # onnxruntime-gpu alone must provide the `onnxruntime` module.
        assert "--no-install-package onnxruntime" in run.args, run.args


def test_uv_sync_flags_exist_in_this_uv(speech: Dockerfile) -> None:
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    help_text = subprocess.run(
        [uv, "sync", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for run in _uv_sync(speech):
        for flag in set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", run.args)):
            assert re.search(rf"(?<![\w-]){flag}(?![\w-])", help_text), f"uv sync has no {flag}"


def test_no_torch_anywhere() -> None:
    for path in (SPEECH_DOCKERFILE, AGENT_DOCKERFILE):
        if path.exists():
            assert not re.search(r"\btorch\b", path.read_text(), re.IGNORECASE), path.name


def test_copy_sources_exist_and_are_in_the_build_context() -> None:
    patterns = dockerignore_patterns()
    for path in (SPEECH_DOCKERFILE, AGENT_DOCKERFILE):
        if not path.exists():
            continue
        for stage in parse_dockerfile(path.read_text()).stages:
            for instruction in stage.all("COPY") + stage.all("ADD"):
                for source in copy_sources(instruction):
                    where = f"{path.name}:{instruction.line} {source}"
                    assert (REPO / source).exists(), f"{where} does not exist"
                    assert not ignored(source, patterns), f"{where} is excluded by .dockerignore"
                    files = (
                        [REPO / source] if (REPO / source).is_file() else (REPO / source).rglob("*")
                    )
                    for file in files:
                        relative = file.relative_to(REPO).as_posix()
                        if file.is_file() and "__pycache__" not in relative:
                            assert not ignored(relative, patterns), (
                                f"{where}: {relative} is excluded"
                            )


def test_dockerignore_keeps_local_state_out() -> None:
    patterns = dockerignore_patterns()
    for path in (
        ".venv/bin/python",
        ".git/HEAD",
        "tests/conftest.py",
        ".pytest_cache/v",
        "src/voicestream/__pycache__/x.pyc",
    ):
        assert ignored(path, patterns), path


def test_weights_are_baked_into_the_final_stage(speech: Dockerfile) -> None:
    cache = speech.env(speech.final)["VOICESTREAM_CACHE"]
    pulls = [
        (s, i) for s in speech.stages for i in s.all("RUN") if "voicestream models pull" in i.args
    ]
    assert len(pulls) == 1, "the weights are pulled once, at build time"
    builder, _ = pulls[0]
    assert speech.env(builder)["VOICESTREAM_CACHE"] == cache
    copies = [i for i in speech.final.all("COPY") if i.flags.get("from") == builder.name]
    assert any(i.args.split()[0].rstrip("/") == cache.rstrip("/") for i in copies), (
        "the cache is not copied"
    )


def test_nothing_shadows_the_sagemaker_model_dir(speech: Dockerfile) -> None:
    """An explicit model directory would win over /opt/ml/model (engine/weights.py)."""
    assert "VOICESTREAM_MODEL_DIR" not in speech.env(speech.final)
    assert "--model-dir" not in speech.text


def test_pythonunbuffered_and_a_ping_healthcheck(speech: Dockerfile) -> None:
    assert speech.env(speech.final).get("PYTHONUNBUFFERED") == "1"
    healthcheck = speech.final.last("HEALTHCHECK")
    assert healthcheck is not None and "/ping" in healthcheck.args


# --- the entrypoint, run ----------------------------------------------------------------


def _entrypoint_script(speech: Dockerfile) -> str:
    entrypoint = speech.final.last("ENTRYPOINT")
    assert entrypoint is not None and entrypoint.exec_form, "ENTRYPOINT must be in exec form"
    program = entrypoint.exec_form[0]
    for instruction in speech.final.all("COPY"):
        if instruction.heredocs and Path(instruction.args.split()[-1]).name == program:
            assert instruction.flags.get("chmod", "").endswith("755"), (
                "the entrypoint is not executable"
            )
            return next(iter(instruction.heredocs.values()))
    raise AssertionError(f"no script for ENTRYPOINT {program} in the final stage")


def _run_entrypoint(
    speech: Dockerfile,
    tmp_path: Path,
    *args: str,
    driver: str | None = None,
    compat: str | None = None,
    env: dict[str, str] | None = None,
) -> tuple[list[str], str | None]:
    """Run the entrypoint with `sh`; returns the arguments `voicestream` got and its LD_LIBRARY_PATH."""
    script = _entrypoint_script(speech)
    compat_dir, driver_file = tmp_path / "compat", tmp_path / "nvidia-version"
    for real, fake in (
        ("/usr/local/cuda/compat", compat_dir),
        ("/proc/driver/nvidia/version", driver_file),
    ):
        assert real in script
        script = script.replace(real, str(fake))
    compat_dir.mkdir()
    if compat is not None:
        (compat_dir / f"libcuda.so.{compat}").touch()
        (compat_dir / "libcuda.so.1").symlink_to(f"libcuda.so.{compat}")
    if driver is not None:
        driver_file.write_text(
            f"NVRM version: {driver}\nGCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n"
        )
    bin_dir, record = tmp_path / "bin", tmp_path / "argv.json"
    bin_dir.mkdir()
    fake = bin_dir / "voicestream"
    fake.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"json.dump([sys.argv[1:], os.environ.get('LD_LIBRARY_PATH')], open({str(record)!r}, 'w'))\n"
    )
    fake.chmod(0o755)
    (tmp_path / "entrypoint").write_text(script)
    environment = {**speech.env(speech.final), **(env or {}), "PATH": f"{bin_dir}:/usr/bin:/bin"}
    subprocess.run(
        ["sh", str(tmp_path / "entrypoint"), *args], env=environment, check=True, timeout=10
    )
    argv, ld_path = json.loads(record.read_text())
    return argv, ld_path


def _serve_options(argv: list[str]) -> dict[str, object]:
    """What the real CLI makes of `voicestream serve ...` (parsed, not run)."""
    assert argv[0] == "serve", argv
    command = typer.main.get_command(cli_app).commands["serve"]  # type: ignore[attr-defined]
    return command.make_context("serve", list(argv[1:])).params


def test_default_command_is_serve(speech: Dockerfile) -> None:
    cmd = speech.final.last("CMD")
    assert cmd is not None and cmd.exec_form == ["serve"]


@pytest.mark.parametrize("args", [(), ("serve",)], ids=["no arguments", "sagemaker serve"])
def test_serve_alone_runs_the_server_on_8080_with_cuda(
    speech: Dockerfile, tmp_path: Path, args: tuple
) -> None:
    argv, ld_path = _run_entrypoint(speech, tmp_path, *args)
    options = _serve_options(argv)
    assert (options["host"], options["port"], options["device"]) == ("0.0.0.0", 8080, "cuda")
    assert options["model_dir"] is None
    assert ld_path is None


def test_options_after_serve_win(speech: Dockerfile, tmp_path: Path) -> None:
    argv, _ = _run_entrypoint(speech, tmp_path, "serve", "--device", "cpu", "--port", "9000")
    options = _serve_options(argv)
    assert (options["device"], options["port"]) == ("cpu", 9000)


def test_sagemaker_bind_port_is_honoured(speech: Dockerfile, tmp_path: Path) -> None:
    argv, _ = _run_entrypoint(speech, tmp_path, "serve", env={"SAGEMAKER_BIND_TO_PORT": "8085"})
    assert _serve_options(argv)["port"] == 8085


def test_other_commands_pass_through(speech: Dockerfile, tmp_path: Path) -> None:
    argv, _ = _run_entrypoint(speech, tmp_path, "models", "list")
    assert argv == ["models", "list"]


@pytest.mark.parametrize(
    ("driver", "uses_compat"),
    [
        ("NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024", True),
        (
            "NVIDIA UNIX Open Kernel Module for x86_64  570.133.20  Release Build  (dvs-builder@U16)",
            True,
        ),
        (
            "NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16)",
            False,
        ),
        (
            "NVIDIA UNIX Open Kernel Module for x86_64  590.44.01  Release Build  (dvs-builder@U16)",
            False,
        ),
    ],
    ids=["535", "570-open", "580-same", "590-newer"],
)
def test_cuda_forward_compatibility_only_for_older_drivers(
    speech: Dockerfile, tmp_path: Path, driver: str, uses_compat: bool
) -> None:
    argv, ld_path = _run_entrypoint(
        speech,
        tmp_path,
        "serve",
        driver=driver,
        compat="580.95.05",
        env={"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"},
    )
    assert argv[0] == "serve"
    expected = (
        f"{tmp_path / 'compat'}:/usr/local/nvidia/lib64"
        if uses_compat
        else "/usr/local/nvidia/lib64"
    )
    assert ld_path == expected


# --- compose, the agent image, and hosts ---------------------------------------------------


def test_compose_runs_speech_on_8080_and_the_agent_on_8081(speech: Dockerfile) -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    dockerfiles = {}
    for name in ("speech", "agent"):
        build = services[name]["build"]
        context = (COMPOSE.parent / build["context"]).resolve()
        assert context == REPO, name
        dockerfiles[name] = (context / build["dockerfile"]).resolve()
    assert dockerfiles == {"speech": SPEECH_DOCKERFILE, "agent": AGENT_DOCKERFILE}

    flavor = substitute(services["speech"]["build"]["args"]["FLAVOR"], {})
    assert speech.stage(f"base-{flavor}") is not None, f"FLAVOR={flavor} names no stage"
    assert "8080:8080" in services["speech"]["ports"]
    assert any(str(port).startswith("8081:") for port in services["agent"]["ports"])

    environment = services["agent"]["environment"]
    if isinstance(environment, list):
        environment = dict(item.partition("=")[::2] for item in environment)
    assert environment["VOICESTREAM_SPEECH_URL"] == SPEECH_URL


@pytest.mark.skipif(
    not AGENT_DOCKERFILE.exists(), reason="docker/agent.Dockerfile is not written yet"
)
def test_agent_image_is_slim_arm64_and_not_root() -> None:
    agent = parse_dockerfile(AGENT_DOCKERFILE.read_text())
    assert agent.base_image(agent.final) == "python:3.12-slim"
    arm64 = agent.final.platform == "linux/arm64" or "linux/arm64" in agent.text
    assert arm64, "arm64 is neither set on FROM nor documented"
    user = agent.final.last("USER")
    assert user is not None and user.args.split(":")[0] not in {"root", "0"}


def test_agent_image_installs_the_agent_extra_only() -> None:
    """No speech engine in the agent's image (tests/test_dependency_split.py checks the set)."""
    agent = parse_dockerfile(AGENT_DOCKERFILE.read_text())
    syncs = [i for stage in agent.stages for i in stage.all("RUN") if "uv sync" in i.args]
    assert syncs
    for run in syncs:
        assert re.search(r"--(locked|frozen)\b", run.args) and "--no-dev" in run.args, run.args
        assert re.findall(r"--extra (\S+)", run.args) == ["agent"], run.args
        assert "--all-extras" not in run.args, run.args


@pytest.mark.parametrize("path", sorted(p.name for p in DOCKER.iterdir() if p.is_file()))
def test_no_remote_host_is_named(path: str) -> None:
    """Packages come through their ordinary clients by name, never from a written address."""
    text = (DOCKER / path).read_text()
    for host in re.findall(r"[a-z][a-z0-9+.-]*://([^/:\s'\"]+)", text):
        assert host in LOCAL_HOSTS or host.isupper(), f"{path} names the host {host}"
    images = re.findall(r"^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)|--from=(\S+)", text, re.MULTILINE)
    for image in (name for pair in images for name in pair if name):
        first = image.split("/")[0]
        assert "." not in first and ":" not in first.split("@")[0] or "/" not in image, (
            f"{path} pulls {image} from a named registry host"
        )
