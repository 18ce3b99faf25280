"""``scripts/kafka/localkafka.py``: its command line describes itself, and its port checks reuse
a port that is only in TIME_WAIT.

A broker stopped a moment ago (which closed its clients' connections first) leaves its port in
TIME_WAIT for up to a minute. The broker (Java, ``SO_REUSEADDR``) can listen there at once, so the
script's own check must not refuse the port: it probes with ``SO_REUSEADDR`` too. These tests make
a real TIME_WAIT port (listen, accept, close the server's end first) and show that ``start``'s port
check accepts it, while a port something listens on is still refused.
"""

from __future__ import annotations

import contextlib
import errno
import io
import re
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from scripts.kafka import localkafka

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "kafka" / "localkafka.py"
TIME_WAIT = "06"  # the st column of /proc/net/tcp




# --------------------------------------------------------------------------------------------
# TIME_WAIT
# --------------------------------------------------------------------------------------------


def tcp_states(port: int) -> list[str]:
    """The states (hex, as /proc/net/tcp writes them) of every TCP socket whose local port is
    ``port``: IPv4 ones and IPv6 ones (Java's sockets are IPv6, 127.0.0.1 mapped into them).
    """
    states = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                states.append(fields[3])
    return states


def leave_in_time_wait(port: int = 0, host: str = "127.0.0.1", *, reuse: bool = True) -> int:
    """Listen on ``port`` (0: any), accept one connection, close the server's end first, then the
    client's and the listener: the accepted socket's end stays in TIME_WAIT on that port, as a
    stopped broker's does. Returns the port once /proc/net/tcp shows the TIME_WAIT entry.

    ``reuse``: the listener sets ``SO_REUSEADDR``, as the broker's (Java's) does. Linux lets a new
    socket bind over a TIME_WAIT entry only when both the new socket and the one that left the
    entry set it; with ``reuse=False`` the port stays unusable for the broker too.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, int(reuse))
        server.bind((host, port))
        server.listen(1)
        port = server.getsockname()[1]
        with socket.create_connection((host, port), timeout=5) as client:
            conn, _ = server.accept()
            conn.close()  # active close on the server side: its end goes to TIME_WAIT
            assert client.recv(1) == b""  # the client saw the FIN
    deadline = time.monotonic() + 5
    while TIME_WAIT not in tcp_states(port):
        assert time.monotonic() < deadline, f"no TIME_WAIT on port {port}: {tcp_states(port)}"
        time.sleep(0.01)
    return port


def plain_bind_error(port: int, host: str = "127.0.0.1") -> int | None:
    """The errno of binding ``port`` without ``SO_REUSEADDR`` (None when it binds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as e:
            return e.errno
    return None


@pytest.fixture
def time_wait_port() -> int:
    port = leave_in_time_wait()
    # The reproduction is real: the port is taken for a socket without SO_REUSEADDR (the check
    # before this fix bound like that and so called the port "already in use").
    assert plain_bind_error(port) == errno.EADDRINUSE
    assert "0A" not in tcp_states(port)  # nothing listens there (0A = LISTEN)
    return port


@pytest.fixture
def no_broker(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``start_single`` up to and including its port checks, without mvn or a JVM."""
    calls: list[str] = []

    def record(name: str) -> Any:
        def step(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return Path("/nonexistent-libs") if name == "install" else None

        return step

    for name in ("install", "_format", "_launch", "_wait_ready"):
        monkeypatch.setattr(localkafka, name, record(name))
    return calls


def test_the_port_check_accepts_a_port_in_time_wait(time_wait_port: int) -> None:
    assert localkafka.port_available(time_wait_port)


def test_a_time_wait_left_by_a_listener_without_reuse_is_refused() -> None:
    """No socket can listen there (Java's neither), so the check is right to refuse the port."""
    port = leave_in_time_wait(reuse=False)
    assert not localkafka.port_available(port)


def test_start_accepts_a_port_in_time_wait(time_wait_port: int, no_broker: list[str], tmp_path: Path) -> None:
    handle = localkafka.start_single(time_wait_port, tmp_path / "kafka", quiet=True)
    assert handle.bootstrap == f"127.0.0.1:{time_wait_port}"
    assert no_broker == ["install", "_format", "_launch", "_wait_ready"]  # it went on to launch


def test_start_still_refuses_a_port_something_listens_on(no_broker: list[str], tmp_path: Path) -> None:
    for reuse in (0, 1):  # whether or not the holder set SO_REUSEADDR itself
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
            holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, reuse)
            holder.bind(("127.0.0.1", 0))
            holder.listen(1)
            port = holder.getsockname()[1]
            assert not localkafka.port_available(port)
            with pytest.raises(localkafka.KafkaStartError, match=f"port 127.0.0.1:{port} is already in use"):
                localkafka.start_single(port, tmp_path / "kafka", quiet=True)
    assert "_launch" not in no_broker


def test_start_refuses_a_port_bound_without_reuse() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))  # bound, not listening, no SO_REUSEADDR
        assert not localkafka.port_available(holder.getsockname()[1])


def test_picked_ports_are_distinct_and_skip_excluded() -> None:
    taken = localkafka.free_ports(3)
    ports = localkafka.free_ports(20, exclude=taken)
    assert len(set(ports)) == 20 and not set(ports) & set(taken)
    assert all(localkafka.port_available(p) for p in ports)
    assert 0 < localkafka.free_port() < 65536


def test_start_refuses_the_same_port_twice(no_broker: list[str], tmp_path: Path) -> None:
    port = localkafka.free_port()
    with pytest.raises(ValueError, match="ports must all differ"):
        localkafka.start_single(port, tmp_path / "kafka", controller_port=port, quiet=True)


# --------------------------------------------------------------------------------------------
# --help
# --------------------------------------------------------------------------------------------

COMMANDS = ["install", "start", "stop", "status", "cluster"]
OPTION_ENV = {  # option -> the environment variable its default comes from
    ("start", "--port"): "KAFKA_PORT",
    ("start", "--controller-port"): "KAFKA_CONTROLLER_PORT",
    ("start", "--data-dir"): "STREAMPROC_KAFKA_DATA",
    ("stop", "--data-dir"): "STREAMPROC_KAFKA_DATA",
    ("status", "--data-dir"): "STREAMPROC_KAFKA_DATA",
    ("cluster", "--data-dir"): "STREAMPROC_KAFKA_DATA",
}


def run_help(*argv: str) -> str:
    """What ``localkafka.py ARGV --help`` prints (it must exit 0)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_info:
        localkafka.main([*argv, "--help"])
    assert exit_info.value.code == 0
    return out.getvalue()


def described_options(help_text: str) -> dict[str, str]:
    """Each option (``--port``) or positional (``I``) of a help screen -> the text describing it."""
    entries: dict[str, str] = {}
    current: str | None = None
    in_section = False
    for line in help_text.splitlines():
        if not line.startswith(" "):  # a section header, a paragraph or a blank line
            in_section = line.endswith(("options:", "arguments:"))
            current = None
            continue
        if not in_section:
            continue
        entry = re.match(r"^  (\S+(?: \S+)*?)(?:\s{2,}(\S.*))?$", line)
        if entry:
            names = entry.group(1)
            # "-h, --help" -> "--help"; "--ports P1,P2,..." -> "--ports"; a positional as written
            current = re.findall(r"--?[\w-]+", names)[-1] if names.startswith("-") else names
            entries[current] = entry.group(2) or ""
        elif current is not None:
            entries[current] = f"{entries[current]} {line.strip()}".strip()
    return entries


def _usage_options(help_text: str) -> set[str]:
    usage = help_text.split("\n\n", 1)[0]
    return set(re.findall(r"\[(--[\w-]+)", usage))


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_of_every_command_is_described_with_its_default(command: str) -> None:
    text = run_help(command)
    described = described_options(text)
    for option in _usage_options(text):
        assert described.get(option), f"`{command} --help` does not describe {option}:\n{text}"
        assert "default" in described[option], f"`{command} --help`: {option} names no default:\n{text}"
        env = OPTION_ENV.get((command, option))
        if env:
            assert f"${env}" in described[option], f"`{command} --help`: {option} does not name ${env}"
    if command == "cluster":
        assert "restart I" in described.get("{start,stop,kill,restart,status}", ""), text
        assert "0-based broker index" in described.get("I", ""), text
    assert len(text.split("\n\n")) >= 3, f"`{command} --help` has no description paragraph:\n{text}"


def test_top_level_help_lists_every_command_and_every_environment_variable() -> None:
    text = run_help()
    for command in COMMANDS:
        assert re.search(rf"^\s+{command}\s+\S", text, re.MULTILINE), (
            f"top-level --help does not describe {command}"
        )
    read = set(re.findall(r"os\.environ\.get\(\s*\"([A-Z_]+)\"", SCRIPT.read_text()))
    read |= set(re.findall(r"_env_int\(\"([A-Z_]+)\"\)", SCRIPT.read_text()))
    assert {"KAFKA_PORT", "STREAMPROC_CACHE", "KAFKA_HEAP_OPTS"} <= read  # the scan finds them
    missing = sorted(name for name in read if not re.search(rf"^\s+{name}\s+\S", text, re.MULTILINE))
    assert not missing, f"top-level --help does not explain {missing}:\n{text}"


def test_help_shows_the_default_an_environment_variable_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_PORT", "19092")
    monkeypatch.setenv("KAFKA_CONTROLLER_PORT", "19093")
    monkeypatch.setenv("STREAMPROC_KAFKA_DATA", "/tmp/kd")
    described = described_options(run_help("start"))
    assert "default 19092" in described["--port"]
    assert "19093" in described["--controller-port"]
    assert "/tmp/kd/single" in described["--data-dir"]


def test_a_bad_port_list_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        localkafka.main(["cluster", "start", "--ports", "9092,x"])
    assert exit_info.value.code == 2
    assert "'9092,x' is not a comma-separated list of port numbers" in capsys.readouterr().err


def test_start_never_wipes_a_directory_that_is_not_a_local_kafka(tmp_path: Path) -> None:
    precious = tmp_path / "notes"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(localkafka.KafkaStartError, match="is not empty and holds no local Kafka"):
        localkafka.start_single(localkafka.free_port(), data_dir=precious, timeout=5, quiet=True)
    assert (precious / "notes.txt").read_text() == "keep me"
