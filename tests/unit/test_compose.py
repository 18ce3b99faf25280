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
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import tomllib
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
                    problems.append(f"{where}: build target {target!r} is not a stage of {dockerfile} ({stages})")
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
