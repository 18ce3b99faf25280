"""docker-compose.yml (and the Dockerfile it builds) only reference things that exist here.

Rules applied to every service:
- ``build.context`` and ``build.dockerfile`` exist; ``build.target`` is a ``FROM ... AS`` stage;
  every ``COPY``/``ADD`` source of that Dockerfile exists in the context;
- ``streamproc run|describe|reprocess MODULE``: MODULE is a module file or package in the repo,
  and the ``streamproc`` console script's target module exists;
- ``python -m MODULE``: a repo module when its top level is a repo package, else importable here;
- a command token that looks like a relative path (``scripts/x.py``, ``tests/integration``) exists;
- ``env_file`` entries and relative host paths of ``volumes`` exist; ``depends_on`` names services;
- the Kafka image is ``apache/kafka`` pinned to the version ``scripts/kafka`` runs.

And, since no Docker engine runs it here:
- the file validates against the Compose Specification's JSON schema (``compose-spec.json`` of the
  compose-spec project, as vendored in the ``check-jsonschema`` package of the test extra; validated
  with ``jsonschema``). Without that package the schema tests skip, and fail when ``CI=true``;
- the ``processor`` service runs the command the docs give: same program, subcommand, topology
  module and settings flags as the README's ``streamproc run`` command (values equal except the
  broker address, which is the compose broker's in-network listener), the same
  ``--application-id`` as every documented run of that module, and only flags ``streamproc run``
  accepts.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
STREAMPROC_SUBCOMMANDS = {"run", "describe", "reprocess"}
_PATH_SUFFIXES = (".py", ".sh", ".toml", ".yml", ".yaml", ".cfg", ".ini", ".txt", ".md", ".json")


def _tokens(command: Any) -> list[str]:
    if command is None:
        return []
    if isinstance(command, str):
        return shlex.split(command)
    return [str(t) for t in command]


def _module_exists(module: str, root: Path) -> bool:
    base = root.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _local_top_levels(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").is_file()} | {"scripts"}


def _looks_like_path(token: str) -> bool:
    if not token or token.startswith(("-", "/", "$")) or "://" in token or "=" in token:
        return False
    if re.fullmatch(r"[\w.-]+:\d+", token):  # host:port
        return False
    return "/" in token or token.endswith(_PATH_SUFFIXES)


def _dockerfile_stages_and_sources(dockerfile: Path) -> tuple[set[str], list[str]]:
    stages: set[str] = set()
    sources: list[str] = []
    lines = dockerfile.read_text().replace("\\\n", " ").splitlines()
    for line in lines:
        parts = line.strip().split()
        if not parts or parts[0].startswith("#"):
            continue
        instr = parts[0].upper()
        if instr == "FROM" and len(parts) >= 4 and parts[2].upper() == "AS":
            stages.add(parts[3])
        elif instr in ("COPY", "ADD"):
            args = parts[1:]
            if any(a.startswith("--from=") for a in args):
                continue  # copies from another stage/image, not the context
            args = [a for a in args if not a.startswith("--")]
            if args and args[0].startswith("["):  # JSON form
                args = [a.strip('[]",') for a in args]
            sources.extend(args[:-1])
    return stages, sources


def missing_references(compose: dict[str, Any], root: Path) -> list[str]:
    """Every reference in ``compose`` (relative to ``root``) that does not resolve, as messages."""
    problems: list[str] = []
    services: dict[str, Any] = compose.get("services") or {}
    if not services:
        problems.append("no services defined")
    local_tops = _local_top_levels(root)
    for name, svc in services.items():
        where = f"service {name!r}"
        build = svc.get("build")
        if build is not None:
            if isinstance(build, str):
                build = {"context": build}
            context = root / build.get("context", ".")
            dockerfile = context / build.get("dockerfile", "Dockerfile")
            if not context.is_dir():
                problems.append(f"{where}: build context {context} does not exist")
            elif not dockerfile.is_file():
                problems.append(f"{where}: dockerfile {dockerfile} does not exist")
            else:
                stages, sources = _dockerfile_stages_and_sources(dockerfile)
                target = build.get("target")
                if target is not None and target not in stages:
                    problems.append(
                        f"{where}: build target {target!r} is not a stage of {dockerfile} ({stages})"
                    )
                for src in sources:
                    if not any(context.glob(src)):
                        problems.append(f"{where}: {dockerfile.name} copies {src!r}, missing from {context}")
        tokens = _tokens(svc.get("entrypoint")) + _tokens(svc.get("command"))
        for i, tok in enumerate(tokens):
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            if tok == "streamproc" and nxt in STREAMPROC_SUBCOMMANDS:
                module = next((t for t in tokens[i + 2 :] if not t.startswith("-")), None)
                if module is None or not _module_exists(module, root):
                    problems.append(f"{where}: `streamproc {nxt}` module {module!r} not found in {root}")
            if tok == "-m" and i > 0 and Path(tokens[i - 1]).name.startswith("python") and nxt:
                if nxt.split(".")[0] in local_tops:
                    if not _module_exists(nxt, root):
                        problems.append(f"{where}: module {nxt!r} (python -m) not found in {root}")
                elif importlib.util.find_spec(nxt.split(".")[0]) is None:
                    problems.append(f"{where}: module {nxt!r} (python -m) is not installed")
            if _looks_like_path(tok):
                path = tok.split("::")[0]
                if not (root / path).exists():
                    problems.append(f"{where}: command references {path!r}, missing from {root}")
        env_files = svc.get("env_file") or []
        for env_file in [env_files] if isinstance(env_files, str) else env_files:
            path = env_file if isinstance(env_file, str) else env_file.get("path", "")
            if not (root / path).is_file():
                problems.append(f"{where}: env_file {path!r} missing")
        for volume in svc.get("volumes") or []:
            host = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
            if host.startswith(".") and not (root / host).exists():
                problems.append(f"{where}: volume source {host!r} missing")
        depends = svc.get("depends_on") or []
        for dep in depends if isinstance(depends, list) else depends.keys():
            if dep not in services:
                problems.append(f"{where}: depends_on {dep!r} is not a service")
    return problems


def _load_localkafka_version() -> str:
    from tests.support.kafka import localkafka

    return str(localkafka.KAFKA_VERSION)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def test_every_reference_in_compose_exists(compose: dict[str, Any]) -> None:
    assert missing_references(compose, ROOT) == []


def test_compose_has_kafka_processor_and_tests_services(compose: dict[str, Any]) -> None:
    services = compose["services"]
    image = services["kafka"]["image"]
    assert image == f"apache/kafka:{_load_localkafka_version()}", "pin the Kafka version scripts/kafka runs"
    assert image.split(":")[1].startswith("4.")
    env = services["kafka"]["environment"]
    assert "broker" in env["KAFKA_PROCESS_ROLES"] and "controller" in env["KAFKA_PROCESS_ROLES"]  # KRaft

    processor = _tokens(services["processor"]["command"])
    assert processor[:3] == ["streamproc", "run", "topologies.sessions"]
    assert processor[processor.index("--bootstrap-servers") + 1] == "kafka:9092"
    assert "kafka" in services["processor"]["depends_on"]
    # `streamproc` is the package's console script; its entry point must exist.
    entry = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["streamproc"]
    assert _module_exists(entry.split(":")[0], ROOT), f"console script target {entry!r} missing"

    tests = services["integration-tests"]
    assert tests["environment"]["KAFKA_BOOTSTRAP_SERVERS"] == "kafka:9092"
    assert "tests/integration" in _tokens(tests["command"])


def test_checker_reports_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "real.py").write_text("")
    (tmp_path / "Dockerfile").write_text("FROM python:3.11-slim AS base\nCOPY pkg ./pkg\nCOPY gone.txt ./\n")
    compose = {
        "services": {
            "ok": {"build": {"context": ".", "target": "base"}, "command": "streamproc run pkg.real"},
            "bad": {
                "build": {"context": ".", "target": "nostage"},
                "command": ["streamproc", "run", "pkg.absent", "--bootstrap-servers", "kafka:9092"],
                "entrypoint": "python -m pkg.nothere scripts/absent.py",
                "depends_on": ["ghost"],
                "env_file": "missing.env",
            },
        }
    }
    problems = missing_references(compose, tmp_path)
    text = "\n".join(problems)
    for needle in ("'nostage'", "'gone.txt'", "'pkg.absent'", "'pkg.nothere'", "'scripts/absent.py'",
                   "'ghost'", "'missing.env'"):  # fmt: skip
        assert needle in text, f"{needle} not reported in:\n{text}"
    assert not [p for p in problems if "'ok'" in p and "gone.txt" not in p]
    assert "kafka:9092" not in text


# --------------------------------------------------------------------------------------------
# The Compose Specification's JSON schema
# --------------------------------------------------------------------------------------------

SCHEMA_MISSING = (
    "the Compose Specification's JSON schema is not installed (it comes with the test extra: packages "
    "jsonschema and check-jsonschema); run `bash scripts/setup.sh` (or `.venv/bin/pip install -e '.[test]'`)"
)


def load_compose_schema() -> dict[str, Any] | None:
    """The Compose Specification's schema as ``check-jsonschema`` vendors it; None when not installed."""
    try:
        from check_jsonschema.builtin_schemas import get_builtin_schema
    except ImportError:
        return None
    return get_builtin_schema("vendor.compose-spec")


def schema_errors(document: Any, schema: dict[str, Any]) -> list[str]:
    """Every way ``document`` breaks ``schema``, as ``path: message`` lines ([] when it is valid).

    The validator is the one for the schema's own ``$schema`` draft, with format checks on.
    """
    import jsonschema

    validator_cls = jsonschema.validators.validator_for(schema)
    validator_cls.check_schema(schema)
    validator = validator_cls(schema, format_checker=validator_cls.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(top level)'}: {e.message}" for e in errors]


@pytest.fixture(scope="module")
def compose_schema() -> dict[str, Any]:
    schema = load_compose_schema()
    if schema is None or importlib.util.find_spec("jsonschema") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true, so not skipped: {SCHEMA_MISSING}", pytrace=False)
        pytest.skip(SCHEMA_MISSING)
    assert schema.get("title") == "Compose Specification", (
        f"not the compose spec's schema: {schema.get('title')}"
    )
    return schema


def test_compose_file_is_valid_under_the_compose_specification(
    compose: dict[str, Any], compose_schema: dict[str, Any]
) -> None:
    errors = schema_errors(compose, compose_schema)
    assert not errors, "docker-compose.yml breaks the Compose Specification:\n" + "\n".join(errors)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        node = doc
        for key in parents:
            node = node[key]
        node[last] = value

    return mutate


BROKEN = {  # what is broken -> (how, the path its error names)
    "ports not a list": (_set("services/processor/ports", "not-a-port-list"), "services/processor/ports"),
    "unknown top-level key": (_set("servics", {"x": {"image": "busybox"}}), "(top level)"),
    "unknown service key": (_set("services/processor/comand", ["streamproc"]), "services/processor"),
    "unknown depends_on condition": (
        _set("services/processor/depends_on/kafka/condition", "service_happy"),
        "services/processor/depends_on",
    ),
    "healthcheck interval not a duration string": (
        _set("services/kafka/healthcheck/interval", 5),
        "services/kafka/healthcheck/interval",
    ),
    "command neither string nor list": (_set("services/processor/command", {"run": 1}), "services/processor"),
}


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_schema_validation_rejects_a_broken_compose_file(
    broken: str, compose: dict[str, Any], compose_schema: dict[str, Any]
) -> None:
    mutate, path = BROKEN[broken]
    document = copy.deepcopy(compose)
    mutate(document)
    errors = schema_errors(document, compose_schema)
    assert errors, f"{broken}: the schema accepted it"
    assert any(e.split(": ", 1)[0] == path for e in errors), f"{broken}: no error at {path}: {errors}"
    assert schema_errors(compose, compose_schema) == []  # the original was not touched


# --------------------------------------------------------------------------------------------
# The processor runs the command the docs give
# --------------------------------------------------------------------------------------------

DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def documented_commands(text: str) -> list[tuple[int, list[str]]]:
    r"""Every ``streamproc run ...`` command of a Markdown text, as (line number, tokens from
    ``streamproc`` on): fenced code lines (``\`` continuations joined, ``#`` comments dropped) and
    inline code spans. The program token keeps its path (``.venv/bin/streamproc``).
    """
    found: list[tuple[int, list[str]]] = []
    in_fence = False
    pending: tuple[int, str] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            in_fence, pending = not in_fence, None
            continue
        if in_fence:
            start, joined = pending if pending else (number, "")
            joined += line.rstrip()
            if joined.endswith("\\"):
                pending = (start, joined[:-1] + " ")
                continue
            pending = None
            candidates = [(start, joined)]
        else:
            candidates = [(number, span) for span in re.findall(r"`([^`]+)`", line)]
        for where, snippet in candidates:
            try:
                tokens = shlex.split(snippet, comments=True)
            except ValueError:
                continue
            for i, tok in enumerate(tokens[:-2]):
                if Path(tok).name == "streamproc" and tokens[i + 1] == "run":
                    found.append((where, tokens[i:]))
                    break
    return found


def run_settings(tokens: list[str]) -> tuple[str, str, str, dict[str, str | None]]:
    """(program name, subcommand, module, {flag: value}) of ``streamproc run MODULE --flag value ...``.

    ``--flag=value`` and ``--flag value`` are the same setting (every ``streamproc run`` flag takes
    a value); a flag followed by another flag, or by nothing, has the value None. The module is
    the first argument that is no flag's value, wherever it stands.
    """
    program, subcommand, *rest = tokens
    module = ""
    settings: dict[str, str | None] = {}
    i = 0
    while i < len(rest):
        tok = rest[i]
        if tok.startswith("--"):
            name, eq, value = tok.partition("=")
            if eq:
                settings[name] = value
            elif i + 1 < len(rest) and not rest[i + 1].startswith("-"):
                settings[name] = rest[i + 1]
                i += 1
            else:
                settings[name] = None
        elif not module:
            module = tok
        i += 1
    return Path(program).name, subcommand, module, settings


def compose_broker_address(compose: dict[str, Any]) -> str:
    """``host:port`` that containers reach the compose broker at: its advertised inter-broker listener."""
    env = compose["services"]["kafka"]["environment"]
    listeners = dict(item.split("://", 1) for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    return listeners[env.get("KAFKA_INTER_BROKER_LISTENER_NAME", "PLAINTEXT")]


@functools.cache
def streamproc_run_flags() -> frozenset[str]:
    """The flags ``streamproc run --help`` lists (the CLI of this checkout)."""
    out = subprocess.run(
        [sys.executable, "-m", "streamproc.cli", "run", "--help"], capture_output=True, text=True, check=True
    ).stdout
    return frozenset(re.findall(r"(--[a-z][\w-]*)", out))


def processor_vs_docs(
    compose: dict[str, Any], docs: dict[str, str], run_flags: frozenset[str] | None = None
) -> list[str]:
    """How the compose ``processor`` command differs from the documented one, as messages.

    ``docs``: file name -> Markdown. The reference is the first ``streamproc run`` command of the
    README. Compared with it: program, subcommand, module, the set of settings flags and their
    values; ``--bootstrap-servers`` must instead be :func:`compose_broker_address`. Every
    documented run of the same module that names ``--bootstrap-servers`` must have the same flags,
    and every documented run of the module the same ``--application-id``. With ``run_flags``,
    every flag of the compose command must be one of them.
    """
    documented = {name: documented_commands(text) for name, text in docs.items()}
    readme = [tokens for _, tokens in documented.get("README.md", [])]
    if not readme:
        return ["README.md shows no `streamproc run` command to compare the compose processor with"]
    program, subcommand, module, settings = run_settings(readme[0])
    c_program, c_subcommand, c_module, c_settings = run_settings(
        _tokens(compose["services"]["processor"].get("entrypoint"))
        + _tokens(compose["services"]["processor"]["command"])
    )
    problems = [
        f"compose processor runs {what} {theirs!r}, the README {ours!r}"
        for what, theirs, ours in (
            ("program", c_program, program),
            ("subcommand", c_subcommand, subcommand),
            ("module", c_module, module),
        )
        if theirs != ours
    ]
    if set(c_settings) != set(settings):
        problems.append(
            f"compose processor sets flags {sorted(c_settings)}, the README {sorted(settings)} "
            f"(missing {sorted(set(settings) - set(c_settings))}, extra {sorted(set(c_settings) - set(settings))})"
        )
    for flag in sorted(set(settings) & set(c_settings) - {"--bootstrap-servers"}):
        if c_settings[flag] != settings[flag]:
            problems.append(f"compose processor {flag} {c_settings[flag]!r}, the README {settings[flag]!r}")
    broker = compose_broker_address(compose)
    if c_settings.get("--bootstrap-servers") != broker:
        problems.append(
            f"compose processor --bootstrap-servers {c_settings.get('--bootstrap-servers')!r}, "
            f"the compose broker listens at {broker!r}"
        )
    for name, commands in documented.items():
        for line, tokens in commands:
            _, _, d_module, d_settings = run_settings(tokens)
            if d_module != module:
                continue
            where = f"{name}:{line}"
            if "--bootstrap-servers" in d_settings and set(d_settings) != set(settings):
                problems.append(
                    f"{where} runs {module} with flags {sorted(d_settings)}, the README {sorted(settings)}"
                )
            app_id = d_settings.get("--application-id")
            if app_id is not None and app_id != c_settings.get("--application-id"):
                problems.append(
                    f"{where} runs {module} with --application-id {app_id!r}, compose with "
                    f"{c_settings.get('--application-id')!r}"
                )
    if run_flags is not None:
        unknown = sorted(set(c_settings) - run_flags)
        if unknown:
            problems.append(f"compose processor passes {unknown}, which `streamproc run` does not take")
    return problems


def _docs() -> dict[str, str]:
    return {path.name: path.read_text() for path in DOC_FILES}


def test_processor_runs_the_command_the_docs_give(compose: dict[str, Any]) -> None:
    docs = _docs()
    readme = documented_commands(docs["README.md"])
    assert readme, "README.md shows no `streamproc run` command"
    assert len([c for name in docs for c in documented_commands(docs[name])]) >= 2  # README and docs/
    problems = processor_vs_docs(compose, docs, streamproc_run_flags())
    assert not problems, "the compose processor does not run what the docs give:\n" + "\n".join(problems)


def test_documented_command_extraction() -> None:
    text = """
Run `streamproc run pkg.inline --application-id a` inline.

```bash
.venv/bin/streamproc describe pkg.a      # not a run
.venv/bin/streamproc run pkg.a --bootstrap-servers 127.0.0.1:9092 --application-id=a  # comment
streamproc run pkg.a --application-id a \\
    --state-dir /var/lib/x --changelog-enabled
```
"""
    commands = documented_commands(text)
    assert [line for line, _ in commands] == [2, 6, 7]
    assert run_settings(commands[1][1]) == (
        "streamproc", "run", "pkg.a", {"--bootstrap-servers": "127.0.0.1:9092", "--application-id": "a"},
    )  # fmt: skip
    assert run_settings(["streamproc", "run", "--application-id", "a", "pkg.b"])[2:] == (
        "pkg.b", {"--application-id": "a"},
    )  # fmt: skip
    assert run_settings(commands[2][1])[3] == {
        "--application-id": "a", "--state-dir": "/var/lib/x", "--changelog-enabled": None,
    }  # fmt: skip


def _replace_value(flag: str, value: str) -> Callable[[list[str]], None]:
    return lambda command: command.__setitem__(command.index(flag) + 1, value)


def _replace_token(index: int, value: str) -> Callable[[list[str]], None]:
    return lambda command: command.__setitem__(index, value)


def _drop(flag: str) -> Callable[[list[str]], None]:
    def drop(command: list[str]) -> None:
        i = command.index(flag)
        del command[i : i + 2]

    return drop


PROCESSOR_CHANGES = {  # a change to the compose processor's command -> what the report says
    "program": (_replace_token(0, "python"), "program 'python'"),
    "subcommand": (_replace_token(1, "describe"), "subcommand 'describe'"),
    "module": (_replace_token(2, "topologies.pageviews"), "module 'topologies.pageviews'"),
    "application id": (_replace_value("--application-id", "sessions-2"), "'sessions-2'"),
    "host broker address": (_replace_value("--bootstrap-servers", "localhost:9092"), "'kafka:9092'"),
    "extra setting": (lambda command: command.extend(["--state-dir", "/data"]), "extra ['--state-dir']"),
    "missing setting": (_drop("--application-id"), "missing ['--application-id']"),
    "mistyped flag": (
        lambda command: command.extend(["--bootstrap-sever", "x"]),
        "['--bootstrap-sever'], which `streamproc run` does not take",
    ),
}


@pytest.mark.parametrize("change", sorted(PROCESSOR_CHANGES))
def test_a_processor_that_differs_from_the_docs_is_reported(compose: dict[str, Any], change: str) -> None:
    mutate, reported = PROCESSOR_CHANGES[change]
    document = copy.deepcopy(compose)
    command = _tokens(document["services"]["processor"]["command"])
    mutate(command)
    document["services"]["processor"]["command"] = command
    problems = processor_vs_docs(document, _docs(), streamproc_run_flags())
    assert any(reported in p for p in problems), f"{reported!r} not in {problems}"


def test_docs_that_disagree_with_each_other_are_reported(compose: dict[str, Any]) -> None:
    docs = _docs()
    docs["other.md"] = (
        "```\nstreamproc run topologies.sessions --bootstrap-servers h:1 --application-id s2\n```\n"
    )
    problems = processor_vs_docs(compose, docs)
    assert any(p.startswith("other.md:2 ") and "'s2'" in p for p in problems), problems
    docs["other.md"] = "`streamproc run topologies.sessions --bootstrap-servers h:1`"
    assert any(p.startswith("other.md:1 ") and "with flags" in p for p in processor_vs_docs(compose, docs))
