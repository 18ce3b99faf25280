#!/usr/bin/env python3
"""Run a real Apache Kafka 4.x (KRaft) on 127.0.0.1 from jars fetched off Maven Central.

No Docker engine exists on our machines, so this module fetches the broker's own jars
(``org.apache.kafka:kafka_2.13`` with its runtime dependencies and a log4j2 binding) with
``mvn`` and starts the broker with ``java -cp 'libs/*' kafka.Kafka server.properties``.

It depends on the standard library only, so the same file is the importable API used by the
pytest fixtures and the demo, and the command line behind ``scripts/kafka/*.sh``::

    install()                                     -> Path of the jar dir (idempotent: no mvn run once complete)
    start_single(port=None, data_dir=None)        -> KafkaHandle (.bootstrap, .stop(), .kill(0), .restart(0))
    start_cluster(size=3, data_dir=None)          -> KafkaHandle with 3 broker+controller processes
    stop_dir(data_dir)                            -> stop what a CLI start left running (pid files) and delete it

Exact behaviour:

* ``install`` writes a generated pom into ``$STREAMPROC_CACHE/kafka-<version>/`` (default cache
  ``~/.cache/streamproc``) and runs ``mvn dependency:copy-dependencies`` into ``libs/``; a
  ``libs/.complete`` stamp (naming the version and the pom's digest) makes later calls return at
  once without running ``mvn``.
* ``start_*`` first checks every given port with :func:`port_available` (bind and listen with
  ``SO_REUSEADDR``, as the broker's listener: a port left only in TIME_WAIT by a broker stopped a
  moment ago is accepted, one something listens on raises :class:`KafkaStartError`) and picks
  distinct free ports (:func:`free_ports`) for the ones not given.
* ``start_*`` formats KRaft storage in ``data_dir`` (a fresh temporary directory by default), writes
  one ``server.properties``, ``log4j2.properties`` and ``broker.pid`` per node under
  ``data_dir/node-<id>/``, launches each JVM (in its own session only with ``detach=True``, as
  the CLI does, so it outlives the caller; ``-Xmx512m`` unless
  ``KAFKA_HEAP_OPTS`` says otherwise), and returns only when every node answers a Kafka
  ``Metadata`` request listing all the nodes as brokers. The broker's log4j2 output goes to
  ``node-<id>/logs/server.log``; JVM stdout/stderr to ``node-<id>/stdout.log``. When a node does
  not become ready within ``timeout`` seconds every started process is stopped, the tail of its
  logs is printed to stderr and :class:`KafkaStartError` is raised.
* ``KafkaHandle.stop()`` signals exactly the processes it started (SIGTERM, then SIGKILL after a
  grace period) and removes ``data_dir`` when the handle created or formatted it.
  ``kill(i)`` is ``kill -9`` of node ``i`` (0-based); ``restart(i)`` starts it again on the
  same ports and data and waits until the cluster lists it again.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

KAFKA_VERSION = os.environ.get("STREAMPROC_KAFKA_VERSION", "4.3.1")
"""Apache Kafka version fetched and run: the newest 4.x whose full dependency graph resolves on
Maven Central when written (4.4.0's pom is published but its kafka-tools-api jar is not)."""

SCALA_BINARY = "2.13"
LOG4J_VERSION = "2.25.4"
"""log4j2 version of the slf4j binding; the same log4j-core version kafka-server 4.3.1 depends on."""

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL_CLASS = "kafka.tools.StorageTool"
DEFAULT_HEAP_OPTS = "-Xmx512m -Xms256m"
HOST = "127.0.0.1"

# Test-only dependencies that the published 4.x poms leak into the runtime scope; the broker
# does not load them, so they are excluded to keep the download small.
_EXCLUDED_GROUPS = (
    ("org.junit.jupiter", "*"),
    ("org.junit.platform", "*"),
    ("org.mockito", "*"),
    ("net.bytebuddy", "*"),
    ("org.apache.directory.api", "*"),
    ("org.apache.directory.server", "*"),
    ("org.apache.directory.mavibot", "*"),
    ("org.apache.directory.jdbm", "*"),
    ("org.apache.mina", "*"),
)


class KafkaStartError(RuntimeError):
    """A broker did not start or did not become ready; the message holds the log tail."""


# --------------------------------------------------------------------------------------------
# Install
# --------------------------------------------------------------------------------------------


def cache_root() -> Path:
    """``$STREAMPROC_CACHE`` or ``~/.cache/streamproc``: where fetched jars live (outside git)."""
    env = os.environ.get("STREAMPROC_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "streamproc"


def kafka_home(version: str = KAFKA_VERSION) -> Path:
    return cache_root() / f"kafka-{version}"


def libs_dir(version: str = KAFKA_VERSION) -> Path:
    """The directory whose ``*`` is the broker's classpath."""
    return kafka_home(version) / "libs"


def _pom(version: str) -> str:
    exclusions = "\n".join(
        f"        <exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId></exclusion>"
        for g, a in _EXCLUDED_GROUPS
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by scripts/kafka/localkafka.py: the runtime classpath of a local Kafka broker. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>streamproc.local</groupId>
  <artifactId>kafka-broker-runtime</artifactId>
  <version>{version}</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_{SCALA_BINARY}</artifactId>
      <version>{version}</version>
      <exclusions>
{exclusions}
      </exclusions>
    </dependency>
    <!-- Kafka logs through slf4j 1.7; this binds it to log4j2 (log4j-core comes with kafka-server). -->
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>{LOG4J_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>{LOG4J_VERSION}</version>
    </dependency>
  </dependencies>
</project>
"""


def dir_size(path: Path) -> int:
    """Total size in bytes of the regular files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _human(nbytes: int) -> str:
    return f"{nbytes / (1024 * 1024):.1f} MiB"


def install(version: str = KAFKA_VERSION, *, quiet: bool = False) -> Path:
    """Fetch Kafka ``version``'s jars with mvn into :func:`libs_dir` unless already complete.

    Returns the jar directory. Raises :class:`RuntimeError` naming the missing tool when ``mvn``
    or ``java`` is absent, and with mvn's output when the fetch fails.
    """
    home = kafka_home(version)
    libs = home / "libs"
    pom = _pom(version)
    digest = hashlib.sha256(pom.encode()).hexdigest()[:16]
    stamp = libs / ".complete"
    expected = f"kafka_{SCALA_BINARY}:{version} pom:{digest}\n"
    if stamp.is_file() and stamp.read_text() == expected and any(libs.glob("kafka_*.jar")):
        if not quiet:
            jars = len(list(libs.glob("*.jar")))
            print(f"kafka {version}: {jars} jars already in {libs} ({_human(dir_size(libs))}), nothing fetched")
        return libs
    for tool in ("mvn", "java"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"'{tool}' is not on PATH; the local Kafka needs Java 17+ and Maven 3.8+")
    home.mkdir(parents=True, exist_ok=True)
    (home / "pom.xml").write_text(pom)
    tmp = home / "libs.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = [
        "mvn", "-B", "-q", "-f", str(home / "pom.xml"),
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        f"-DoutputDirectory={tmp}", "-DincludeScope=runtime", "-Dmdep.useRepositoryLayout=false",
    ]  # fmt: skip
    if not quiet:
        print(f"kafka {version}: fetching jars from Maven Central into {libs} ...", flush=True)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, check=False, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(
            f"mvn failed ({proc.returncode}) fetching kafka_{SCALA_BINARY}:{version}:\n"
            + (proc.stdout + proc.stderr)[-4000:]
        )
    if not any(tmp.glob(f"kafka_{SCALA_BINARY}-{version}.jar")):
        raise RuntimeError(f"mvn succeeded but {tmp} holds no kafka_{SCALA_BINARY}-{version}.jar")
    shutil.rmtree(libs, ignore_errors=True)
    tmp.rename(libs)
    stamp.write_text(expected)
    if not quiet:
        jars = len(list(libs.glob("*.jar")))
        print(
            f"kafka {version}: fetched {jars} jars ({_human(dir_size(libs))}) in "
            f"{time.monotonic() - t0:.1f} s into {libs}"
        )
    return libs


# --------------------------------------------------------------------------------------------
# Readiness probe: a Kafka Metadata request over a plain socket (stdlib only)
# --------------------------------------------------------------------------------------------

_API_METADATA = 3
_API_VERSIONS = 18


def _request(sock: socket.socket, api_key: int, api_version: int, corr: int, body: bytes) -> bytes:
    client_id = b"streamproc-localkafka"
    header = struct.pack(">hhih", api_key, api_version, corr, len(client_id)) + client_id
    payload = header + body
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    size = struct.unpack(">i", _recv_exact(sock, 4))[0]
    data = _recv_exact(sock, size)
    if struct.unpack(">i", data[:4])[0] != corr:
        raise ConnectionError("correlation id mismatch")
    return data[4:]


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by broker")
        buf += chunk
    return bytes(buf)


def metadata_brokers(host: str, port: int, timeout: float = 5.0) -> list[int]:
    """Send ApiVersions then a Metadata request (all topics) and return the node ids it lists.

    Uses a non-flexible Metadata version (4..8) that the broker advertises. Raises OSError /
    ConnectionError when the broker does not answer.
    """
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        resp = _request(sock, _API_VERSIONS, 0, 1, b"")
        error, count = struct.unpack(">hi", resp[:6])
        if error != 0:
            raise ConnectionError(f"ApiVersions error {error}")
        versions: dict[int, tuple[int, int]] = {}
        for i in range(count):
            key, lo, hi = struct.unpack(">hhh", resp[6 + 6 * i : 12 + 6 * i])
            versions[key] = (lo, hi)
        lo, hi = versions.get(_API_METADATA, (0, -1))
        version = min(8, hi)
        if version < max(4, lo):
            raise ConnectionError(f"broker supports Metadata v{lo}..v{hi}, probe needs one of v4..v8")
        body = struct.pack(">i?", -1, False)  # topics = null (all), allow_auto_topic_creation
        if version >= 8:
            body += struct.pack(">??", False, False)  # include cluster/topic authorized operations
        resp = _request(sock, _API_METADATA, version, 2, body)
        pos = 4  # throttle_time_ms
        (n,) = struct.unpack(">i", resp[pos : pos + 4])
        pos += 4
        nodes = []
        for _ in range(n):
            (node_id,) = struct.unpack(">i", resp[pos : pos + 4])
            pos += 4
            (hlen,) = struct.unpack(">h", resp[pos : pos + 2])
            pos += 2 + hlen + 4  # host, port
            (rlen,) = struct.unpack(">h", resp[pos : pos + 2])
            pos += 2 + max(rlen, 0)  # rack (nullable)
            nodes.append(node_id)
        return sorted(nodes)


# --------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------


def _listener_socket() -> socket.socket:
    """A TCP socket with ``SO_REUSEADDR`` set, as the broker's own listener has it (Java sets it).

    Without it a port whose previous listener left connections in TIME_WAIT (a broker stopped a
    moment ago, which closed its clients' connections first) cannot be bound for up to a minute,
    although the broker can bind it at once.
    """
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    return s


def free_port(host: str = HOST) -> int:
    """A TCP port that was free on ``host`` a moment ago (bind to port 0 with ``SO_REUSEADDR``)."""
    return free_ports(1, host)[0]


def free_ports(count: int, host: str = HOST, exclude: Iterable[int] = ()) -> list[int]:
    """``count`` distinct TCP ports free on ``host`` a moment ago, none of them in ``exclude``.

    Every socket stays bound until all are picked, so the kernel cannot hand out one port twice.
    """
    excluded = set(exclude)
    held: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            s = _listener_socket()
            held.append(s)
            s.bind((host, 0))
            port = int(s.getsockname()[1])
            if port not in excluded:
                ports.append(port)
    finally:
        for s in held:
            s.close()
    return ports


def port_available(port: int, host: str = HOST) -> bool:
    """Whether a broker could listen on ``host:port`` now.

    True when a socket with ``SO_REUSEADDR`` (as the broker's) can bind and listen there: a port
    held only by connections in TIME_WAIT is available; a port another socket listens on, or has
    bound without ``SO_REUSEADDR``, is not.
    """
    with _listener_socket() as s:
        try:
            s.bind((host, port))
            s.listen(1)
        except OSError:
            return False
        return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped) still accepts signal 0; treat it as dead.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _pid_cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of ``path`` ('' when it does not exist)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class Node:
    """One broker+controller process of a local cluster."""

    node_id: int
    port: int
    controller_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None
    pid: int | None = None

    @property
    def config_file(self) -> Path:
        return self.directory / "server.properties"

    @property
    def pid_file(self) -> Path:
        return self.directory / "broker.pid"

    @property
    def server_log(self) -> Path:
        return self.directory / "logs" / "server.log"

    @property
    def stdout_log(self) -> Path:
        return self.directory / "stdout.log"

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        # Started by another process (attach): alive only if the pid still runs *this* node's JVM.
        return self.pid is not None and _pid_alive(self.pid) and str(self.directory) in _pid_cmdline(self.pid)

    def log_tail(self, lines: int = 40) -> str:
        parts = []
        for path in (self.server_log, self.stdout_log):
            text = tail(path, lines)
            if text:
                parts.append(f"--- tail of {path} ---\n{text}")
        return "\n".join(parts) or f"(no log written under {self.directory})"


def _server_properties(node: Node, voters: str, size: int, overrides: dict[str, str]) -> str:
    # As a production cluster sets them: every topic (created without an explicit factor, and the
    # internal ones) gets 3 replicas, and acks=all needs 2 of them in sync, so one broker may be
    # down without losing an acknowledged write or stopping writes. One broker: 1 and 1.
    rf = str(min(3, size))
    min_isr = "1" if size < 3 else "2"
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://{HOST}:{node.port},CONTROLLER://{HOST}:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{node.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(node.directory / "data"),
        "auto.create.topics.enable": "false",
        "delete.topic.enable": "true",
        "num.partitions": "1",
        "default.replication.factor": rf,
        "min.insync.replicas": min_isr,
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": min_isr,
        "transaction.state.log.num.partitions": "10",
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": min_isr,
        "group.initial.rebalance.delay.ms": "0",
        "log.segment.bytes": str(16 * 1024 * 1024),
        "log.retention.check.interval.ms": "60000",
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
        # Fence a dead broker quickly so fault tests see leadership move within seconds.
        "broker.heartbeat.interval.ms": "500",
        "broker.session.timeout.ms": "3000",
        "controlled.shutdown.enable": "true",
    }
    props.update(overrides)
    return "".join(f"{k}={v}\n" for k, v in props.items())


_LOG4J2 = """\
# Generated by scripts/kafka/localkafka.py: broker logs go to ${sys:kafka.logs.dir}/server.log.
status = warn
name = streamproc-local-kafka
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise KafkaStartError("'java' is not on PATH; the local Kafka needs Java 17+")
    return java


def _jvm_args(libs: Path, node_dir: Path) -> list[str]:
    heap = os.environ.get("KAFKA_HEAP_OPTS", DEFAULT_HEAP_OPTS).split()
    return [
        _java(), *heap,
        "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:+ExitOnOutOfMemoryError",
        "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-Djava.awt.headless=true",
        f"-Dkafka.logs.dir={node_dir / 'logs'}",
        f"-Dlog4j2.configurationFile={node_dir / 'log4j2.properties'}",
        "-cp", f"{libs}/*",
    ]  # fmt: skip


def format_command(libs: Path, node: Node, cluster_id: str) -> list[str]:
    """The storage tool's command line for ``node``.

    Every generated value is passed glued to its option (``--cluster-id=<id>``), so a value that
    begins with ``-`` can never be read as an option of its own.
    """
    return [*_jvm_args(libs, node.directory), STORAGE_TOOL_CLASS, "format",
            f"--cluster-id={cluster_id}", f"--config={node.config_file}", "--ignore-formatted"]  # fmt: skip


def _format(libs: Path, nodes: Sequence[Node], cluster_id: str) -> None:
    """Run the storage tool for every node at once (``kafka-storage.sh format``)."""
    procs = []
    for node in nodes:
        cmd = format_command(libs, node, cluster_id)
        out = open(node.directory / "format.log", "w+b")  # noqa: SIM115 - closed below
        procs.append((node, out, subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out)))
    failures = []
    for node, out, proc in procs:
        try:
            code = proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        out.close()
        if code != 0:
            failures.append(
                f"formatting KRaft storage of node {node.node_id} failed ({code}):\n"
                + tail(node.directory / "format.log", 30)
            )
    if failures:
        raise KafkaStartError("\n".join(failures))


def _launch(libs: Path, node: Node, detach: bool) -> None:
    (node.directory / "logs").mkdir(parents=True, exist_ok=True)
    cmd = [*_jvm_args(libs, node.directory), MAIN_CLASS, str(node.config_file)]
    with open(node.stdout_log, "ab") as out:
        node.process = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            cwd=node.directory, start_new_session=detach,
        )  # fmt: skip
    node.pid = node.process.pid
    node.pid_file.write_text(f"{node.pid}\n")


def _signal_and_wait(node: Node, sig: int, wait: float) -> bool:
    """Send ``sig`` to the node's process (if still ours) and wait up to ``wait`` s for exit."""
    if node.pid is None:
        return True
    if not node.alive():
        return True
    try:
        os.kill(node.pid, sig)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if node.process is not None:
            try:
                node.process.wait(timeout=0.1)
                return True
            except subprocess.TimeoutExpired:
                continue
        if not _pid_alive(node.pid):
            return True
        time.sleep(0.1)
    return not node.alive()


@dataclass
class KafkaHandle:
    """Started local Kafka: one node (``start_single``) or several (``start_cluster``)."""

    nodes: list[Node]
    data_dir: Path
    cluster_id: str
    libs: Path
    owns_data_dir: bool = True
    detach: bool = False
    startup_seconds: float = 0.0
    _stopped: bool = field(default=False, repr=False)

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of every node's client listener."""
        return ",".join(f"{HOST}:{n.port}" for n in self.nodes)

    @property
    def pids(self) -> list[int | None]:
        return [n.pid for n in self.nodes]

    def _node(self, index: int) -> Node:
        if not 0 <= index < len(self.nodes):
            raise IndexError(f"broker index {index} out of range 0..{len(self.nodes) - 1}")
        return self.nodes[index]

    def kill(self, index: int) -> None:
        """``kill -9`` node ``index`` (0-based) and wait until its process is gone."""
        node = self._node(index)
        _signal_and_wait(node, signal.SIGKILL, 30)
        node.pid_file.unlink(missing_ok=True)

    def stop_broker(self, index: int, timeout: float = 30.0) -> None:
        """Gracefully stop node ``index`` (SIGTERM; SIGKILL after ``timeout`` s)."""
        node = self._node(index)
        if not _signal_and_wait(node, signal.SIGTERM, timeout):
            _signal_and_wait(node, signal.SIGKILL, 30)
        node.pid_file.unlink(missing_ok=True)

    def restart(self, index: int, timeout: float = 120.0) -> float:
        """Start node ``index`` again on its ports and data; return seconds until it is listed again."""
        node = self._node(index)
        if node.alive():
            raise RuntimeError(f"broker {index} (pid {node.pid}) is still running; kill or stop it first")
        t0 = time.monotonic()
        _launch(self.libs, node, self.detach)
        _wait_ready(self, [node], timeout)
        return time.monotonic() - t0

    def alive(self, index: int) -> bool:
        return self._node(index).alive()

    def ensure_running(self, timeout: float = 120.0) -> None:
        """Restart every node that is not running (used between fault tests)."""
        dead = [i for i, n in enumerate(self.nodes) if not n.alive()]
        for i in dead:
            self.restart(i, timeout)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(f"== node {n.node_id} ==\n{n.log_tail(lines)}" for n in self.nodes)

    def stop(self, *, grace: float = 20.0, remove_data: bool | None = None) -> None:
        """Stop every process this handle started; delete ``data_dir`` if the handle owns it."""
        if self._stopped:
            return
        for node in self.nodes:
            if node.alive() and node.pid is not None:
                try:
                    os.kill(node.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for node in self.nodes:
            if not _signal_and_wait(node, signal.SIGTERM, grace):
                _signal_and_wait(node, signal.SIGKILL, 30)
            node.pid_file.unlink(missing_ok=True)
        self._stopped = True
        if self.owns_data_dir if remove_data is None else remove_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _wait_ready(handle: KafkaHandle, nodes: Sequence[Node], timeout: float) -> None:
    expected = sorted(n.node_id for n in handle.nodes)
    deadline = time.monotonic() + timeout
    last_error = "no answer yet"
    pending = list(nodes)
    while pending:
        node = pending[0]
        if not node.alive():
            code = node.process.poll() if node.process is not None else "?"
            raise KafkaStartError(
                f"kafka node {node.node_id} (port {node.port}) exited with code {code} before it was ready\n"
                + node.log_tail()
            )
        try:
            listed = metadata_brokers(HOST, node.port, timeout=3.0)
            if listed == expected:
                pending.pop(0)
                continue
            last_error = f"metadata lists brokers {listed}, waiting for {expected}"
        except (OSError, ConnectionError, struct.error) as e:
            last_error = f"{type(e).__name__}: {e}"
        if time.monotonic() > deadline:
            raise KafkaStartError(
                f"kafka node {node.node_id} on {HOST}:{node.port} not ready after {timeout:.0f} s "
                f"({last_error})\n" + node.log_tail()
            )
        time.sleep(0.2)


def _start(
    size: int,
    ports: Sequence[int] | None,
    controller_ports: Sequence[int] | None,
    data_dir: str | Path | None,
    timeout: float,
    overrides: dict[str, str] | None,
    version: str,
    quiet: bool,
    detach: bool,
) -> KafkaHandle:
    libs = install(version, quiet=True)
    ports = list(ports) if ports else free_ports(size)
    controller_ports = list(controller_ports) if controller_ports else []
    if len(controller_ports) < size:
        controller_ports += free_ports(size - len(controller_ports), exclude=(*ports, *controller_ports))
    if len(ports) != size or len(controller_ports) != size:
        raise ValueError(f"need {size} ports and {size} controller ports, got {ports} and {controller_ports}")
    if len({*ports, *controller_ports}) != 2 * size:
        raise ValueError(f"ports must all differ, got {ports} and controller ports {controller_ports}")
    for p in (*ports, *controller_ports):
        if not port_available(p):
            raise KafkaStartError(f"port {HOST}:{p} is already in use; choose another (or stop what holds it)")
    owns = data_dir is None
    root = Path(tempfile.mkdtemp(prefix="streamproc-kafka-")) if data_dir is None else Path(data_dir)
    if not owns:
        if any(root.glob("node-*/broker.pid")):
            running = [n.pid for n in attach(root).nodes if n.pid is not None and n.alive()]
            if running:
                raise KafkaStartError(
                    f"{root} belongs to a running Kafka (pids {running}); stop it first "
                    f"(bash scripts/kafka/stop.sh --data-dir {root})"
                )
        if root.exists() and any(root.iterdir()) and not any(root.glob("node-*")):
            raise KafkaStartError(
                f"{root} is not empty and holds no local Kafka (no node-* directories): it is never wiped; "
                f"give --data-dir a new or empty directory, or one a previous start used"
            )
        shutil.rmtree(root, ignore_errors=True)
        owns = True  # formatted here, so stop() removes it
    root.mkdir(parents=True, exist_ok=True)
    cluster_id = new_cluster_id()
    nodes = [Node(i + 1, ports[i], controller_ports[i], root / f"node-{i + 1}") for i in range(size)]
    voters = ",".join(f"{n.node_id}@{HOST}:{n.controller_port}" for n in nodes)
    for node in nodes:
        (node.directory / "logs").mkdir(parents=True, exist_ok=True)
        node.config_file.write_text(_server_properties(node, voters, size, overrides or {}))
        (node.directory / "log4j2.properties").write_text(_LOG4J2)
    (root / "cluster.txt").write_text(
        f"cluster.id={cluster_id}\nversion={version}\nbootstrap={','.join(f'{HOST}:{p}' for p in ports)}\n"
    )
    handle = KafkaHandle(nodes, root, cluster_id, libs, owns_data_dir=owns, detach=detach)
    t0 = time.monotonic()
    try:
        _format(libs, nodes, cluster_id)
        for node in nodes:
            _launch(libs, node, detach)
        _wait_ready(handle, nodes, timeout)
    except BaseException as e:
        if isinstance(e, KafkaStartError):
            print(f"local kafka failed to start:\n{e}", file=sys.stderr)
        handle.stop(grace=5.0, remove_data=False if isinstance(e, KafkaStartError) else None)
        if isinstance(e, KafkaStartError):
            shutil.rmtree(root, ignore_errors=True)
        raise
    handle.startup_seconds = time.monotonic() - t0
    if not quiet:
        what = "broker" if size == 1 else f"{size}-broker cluster"
        print(
            f"kafka {version} {what} ready at {handle.bootstrap} in {handle.startup_seconds:.1f} s "
            f"(start-to-ready, incl. storage format); data in {root}",
            flush=True,
        )
    return handle


_RESERVED_UUIDS = (bytes(16), bytes(15) + b"\x01")  # Kafka's zero id and its metadata topic id


def new_cluster_id(draw: Callable[[], bytes] = lambda: uuid.uuid4().bytes) -> str:
    """A KRaft cluster id: 16 random bytes as unpadded URL-safe base64 (22 characters).

    About one draw in 64 encodes to a string that begins with ``-``, which command-line tools
    read as an option; like Kafka's own generator we draw again then (and for the two ids Kafka
    reserves), so an id never begins with ``-``. ``draw`` returns 16 bytes (tests pass their own).
    """
    while True:
        raw = draw()
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if raw not in _RESERVED_UUIDS and not text.startswith("-"):
            return text


def start_single(
    port: int | None = None,
    data_dir: str | Path | None = None,
    *,
    controller_port: int | None = None,
    timeout: float = 180.0,
    overrides: dict[str, str] | None = None,
    version: str = KAFKA_VERSION,
    quiet: bool = False,
    detach: bool = False,
) -> KafkaHandle:
    """Format and start one combined broker+controller; free ports are picked when None.

    ``overrides`` are extra/replacement ``server.properties`` entries. Returns once the broker
    answers a Metadata request. ``data_dir`` is wiped and formatted when it is empty or a previous
    start's (a non-empty directory without ``node-*`` is refused); default: a new temp dir.
    ``detach=False`` (default) keeps the JVM in the caller's process group, so killing the
    caller's group (Ctrl-C, a CI job kill) takes the broker with it; the CLI detaches.
    """
    return _start(
        1, [port] if port else None, [controller_port] if controller_port else None,
        data_dir, timeout, overrides, version, quiet, detach,
    )  # fmt: skip


def start_cluster(
    size: int = 3,
    data_dir: str | Path | None = None,
    *,
    ports: Sequence[int] | None = None,
    controller_ports: Sequence[int] | None = None,
    timeout: float = 240.0,
    overrides: dict[str, str] | None = None,
    version: str = KAFKA_VERSION,
    quiet: bool = False,
    detach: bool = False,
) -> KafkaHandle:
    """Start ``size`` separate broker+controller processes forming one KRaft quorum.

    With 3 nodes: replication factor 3 is the default for new and internal topics and
    ``min.insync.replicas`` is 2 (``default.replication.factor=3``, ``min.insync.replicas=2``, as
    in production: acks=all writes go on while one node is down, and an acknowledged write is on
    two nodes). Returns once every node lists all ``size`` brokers.
    """
    if size < 1:
        raise ValueError(f"cluster size must be >= 1, got {size}")
    return _start(size, ports, controller_ports, data_dir, timeout, overrides, version, quiet, detach)


def attach(data_dir: str | Path) -> KafkaHandle:
    """Rebuild a handle for a Kafka a previous process started in ``data_dir`` (from its files)."""
    root = Path(data_dir)
    nodes = []
    for d in sorted(root.glob("node-*"), key=lambda p: int(p.name.split("-")[1])):
        props = dict(
            line.split("=", 1) for line in (d / "server.properties").read_text().splitlines() if "=" in line
        )
        listeners = dict(item.split("://") for item in props["listeners"].split(","))
        node = Node(
            int(props["node.id"]),
            int(listeners["PLAINTEXT"].rsplit(":", 1)[1]),
            int(listeners["CONTROLLER"].rsplit(":", 1)[1]),
            d,
        )
        if node.pid_file.is_file():
            node.pid = int(node.pid_file.read_text().strip())
        nodes.append(node)
    if not nodes:
        raise FileNotFoundError(f"no local Kafka node directories under {root}")
    info = dict(line.split("=", 1) for line in (root / "cluster.txt").read_text().splitlines() if "=" in line)
    return KafkaHandle(
        nodes, root, info.get("cluster.id", ""), libs_dir(info.get("version", KAFKA_VERSION)), detach=True
    )


def stop_dir(data_dir: str | Path, *, keep_data: bool = False) -> list[int]:
    """Stop the processes recorded in ``data_dir``'s pid files, then delete it. Returns the pids."""
    root = Path(data_dir)
    if not root.exists():
        return []
    handle = attach(root)
    pids = [p for p in handle.pids if p is not None]
    handle.stop(remove_data=not keep_data)
    return pids


# --------------------------------------------------------------------------------------------
# Command line (behind scripts/kafka/*.sh)
# --------------------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]


def _default_dir(kind: str) -> Path:
    base = os.environ.get("STREAMPROC_KAFKA_DATA")
    return Path(base) / kind if base else REPO / ".kafka" / kind


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"{name}={value!r} is not a port number") from None


def _port_list(text: str) -> list[int]:
    """``--ports``/``--controller-ports`` values: comma-separated port numbers (argparse type)."""
    try:
        ports = [int(p) for p in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of port numbers") from None
    if not all(0 < p < 65536 for p in ports):
        raise argparse.ArgumentTypeError(f"{text!r}: ports are 1..65535")
    return ports


_ENVIRONMENT = """\
environment variables:
  STREAMPROC_CACHE          jar cache (default ~/.cache/streamproc); jars go to <cache>/kafka-<version>/libs
  STREAMPROC_KAFKA_VERSION  Kafka version fetched and run (default {version})
  STREAMPROC_KAFKA_DATA     parent of the default data dirs <dir>/single and <dir>/cluster
                            (default <repo>/.kafka, which git ignores)
  KAFKA_PORT                default of `start --port` (else 9092)
  KAFKA_CONTROLLER_PORT     default of `start --controller-port` (else a free port)
  KAFKA_HEAP_OPTS           JVM heap options of each broker (default "{heap}")
  JAVA_HOME                 the JDK whose bin/java runs the broker (default: java on PATH)

Each command has its own --help. The shell wrappers scripts/kafka/{{install,start,stop,status,cluster}}.sh
run these commands; docs/kafka.md describes them."""


def _para(text: str) -> str:
    """``text`` wrapped for a help screen (the raw formatter keeps the epilog's table as written)."""
    return textwrap.fill(text, 88)


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``install | start | stop | status | cluster ACTION [INDEX]``.

    Defaults that come from environment variables are read when this is called, so ``--help``
    shows the values a run would use. Every option's help names its default and its variable.
    """
    fmt = argparse.RawDescriptionHelpFormatter
    single, cluster = _default_dir("single"), _default_dir("cluster")
    data_env = "$STREAMPROC_KAFKA_DATA/{kind} when that is set, else <repo>/.kafka/{kind}"
    parser = argparse.ArgumentParser(
        prog="localkafka",
        description=_para(
            "Run a real Apache Kafka (KRaft) on 127.0.0.1 from jars fetched off Maven Central: "
            "one broker+controller (start) or a 3-node cluster (cluster start). Needs java (17+) "
            "and mvn (3.8+)."
        ),
        epilog=_ENVIRONMENT.format(version=KAFKA_VERSION, heap=DEFAULT_HEAP_OPTS),
        formatter_class=fmt,
    )
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    sub.add_parser(
        "install",
        help="fetch the Kafka jars with mvn (idempotent)",
        description=_para(
            f"Fetch Kafka {KAFKA_VERSION}'s jars with mvn into {libs_dir()} (set by "
            "$STREAMPROC_CACHE and $STREAMPROC_KAFKA_VERSION). Once complete, later runs fetch "
            "nothing. No options."
        ),
        formatter_class=fmt,
    )

    p = sub.add_parser(
        "start",
        help="format and start one broker+controller, detached",
        description=_para(
            "Wipe and format DIR, start one combined broker+controller in the background and "
            "return once it answers a Metadata request; prints KAFKA_BOOTSTRAP_SERVERS=... . A port "
            "left only in TIME_WAIT by a broker stopped a moment ago is reused. Stop it with "
            "`localkafka stop`."
        ),
        formatter_class=fmt,
    )
    p.add_argument(
        "--port", type=int, default=_env_int("KAFKA_PORT") or 9092, metavar="PORT",
        help="client (PLAINTEXT) port on 127.0.0.1; default %(default)s ($KAFKA_PORT when set, else 9092)",
    )  # fmt: skip
    p.add_argument(
        "--controller-port", type=int, default=_env_int("KAFKA_CONTROLLER_PORT"), metavar="PORT",
        help="KRaft controller port on 127.0.0.1; default $KAFKA_CONTROLLER_PORT when set, else a free port"
        + (" (now %(default)s)" if os.environ.get("KAFKA_CONTROLLER_PORT") else ""),
    )  # fmt: skip
    p.add_argument(
        "--data-dir", type=Path, default=single, metavar="DIR",
        help=f"broker data, configs, logs and pid file; wiped first when it is a previous start's (any "
        f"other non-empty directory is refused); default %(default)s "
        f"({data_env.format(kind='single')})",
    )  # fmt: skip
    p.add_argument(
        "--timeout", type=float, default=180.0, metavar="SECONDS",
        help="give up (stop the broker, print its log tail, exit 1) when it is not ready after this "
        "long; default %(default)s",
    )  # fmt: skip

    p = sub.add_parser(
        "stop",
        help="stop what `start`/`cluster start` left in a data dir, delete it",
        description=_para(
            "Send SIGTERM (SIGKILL after 20 s) to the brokers recorded in a data dir's pid files "
            "(only pids still running that dir's broker), wait for them, then delete the dir."
        ),
        formatter_class=fmt,
    )
    p.add_argument(
        "--data-dir", type=Path, default=None, metavar="DIR",
        help=f"the data dir to stop; default both {single} and {cluster} "
        f"({data_env.format(kind='single|cluster')})",
    )  # fmt: skip

    p = sub.add_parser(
        "cluster",
        help="3-broker cluster: start | stop | kill I | restart I | status",
        description=_para(
            "A local cluster of SIZE broker+controller processes forming one KRaft quorum "
            "(replication factor 3 and min.insync.replicas 2 by default with 3 nodes)."
        ),
        formatter_class=fmt,
    )
    p.add_argument(
        "action", choices=["start", "stop", "kill", "restart", "status"],
        help="start: wipe DIR, start the cluster, wait until every node lists all brokers; stop: as "
        "`localkafka stop --data-dir DIR`; kill I: kill -9 broker I; restart I: start broker I again "
        "on its ports and data, wait until it is listed; status: ports, pids, running or not",
    )  # fmt: skip
    p.add_argument(
        "index", nargs="?", type=int, metavar="I",
        help="0-based broker index; required by kill and restart, ignored otherwise",
    )  # fmt: skip
    p.add_argument(
        "--size", type=int, default=3, metavar="N",
        help="number of broker+controller nodes for start; default %(default)s",
    )  # fmt: skip
    p.add_argument(
        "--ports", type=_port_list, default=None, metavar="P1,P2,...",
        help="client ports for start, one per node, comma-separated; default free ports",
    )  # fmt: skip
    p.add_argument(
        "--controller-ports", type=_port_list, default=None, metavar="P1,P2,...",
        help="controller ports for start, one per node, comma-separated; default free ports",
    )  # fmt: skip
    p.add_argument(
        "--data-dir", type=Path, default=cluster, metavar="DIR",
        help=f"the cluster's data dir (one node-<id>/ per node); default %(default)s "
        f"({data_env.format(kind='cluster')})",
    )  # fmt: skip
    p.add_argument(
        "--timeout", type=float, default=240.0, metavar="SECONDS",
        help="seconds start (and restart) wait for readiness before giving up; default %(default)s",
    )  # fmt: skip

    p = sub.add_parser(
        "status",
        help="print the bootstrap servers and pids of a data dir",
        description=_para(
            "Print each node's ports, pid and whether it runs, then KAFKA_BOOTSTRAP_SERVERS=... ."
        ),
        formatter_class=fmt,
    )
    p.add_argument(
        "--data-dir", type=Path, default=single, metavar="DIR",
        help=f"the data dir to inspect; default %(default)s ({data_env.format(kind='single')})",
    )  # fmt: skip
    return parser


def main(argv: Iterable[str] | None = None) -> int:
    """Run one command; returns the exit status (1 when Kafka fails to start or a command fails).

    Usage errors exit 2 (argparse), ``--help`` exits 0.
    """
    args = build_parser().parse_args(list(argv) if argv is not None else None)

    try:
        if args.cmd == "install":
            install()
        elif args.cmd == "start":
            h = start_single(
                args.port, args.data_dir, controller_port=args.controller_port, timeout=args.timeout, detach=True
            )
            print(f"KAFKA_BOOTSTRAP_SERVERS={h.bootstrap}")
            print(f"pids {h.pids}; stop with: bash {REPO / 'scripts' / 'kafka' / 'stop.sh'} "
                  f"--data-dir {Path(h.data_dir).resolve()}")
        elif args.cmd == "stop":
            dirs = [args.data_dir] if args.data_dir else [_default_dir("single"), _default_dir("cluster")]
            for d in dirs:
                pids = stop_dir(d)
                if pids:
                    print(f"stopped kafka pids {pids}, removed {d}")
                elif d.exists():
                    shutil.rmtree(d, ignore_errors=True)
                    print(f"nothing running in {d}; removed it")
        elif args.cmd == "status":
            _status(args.data_dir)
        elif args.cmd == "cluster":
            _cluster_cmd(args)
    except (KafkaStartError, RuntimeError, FileNotFoundError, ValueError, IndexError) as e:
        print(f"localkafka {args.cmd}: {e}", file=sys.stderr)
        return 1
    return 0


def _status(data_dir: Path) -> None:
    h = attach(data_dir)
    for i, n in enumerate(h.nodes):
        state = "running" if n.alive() else "stopped"
        print(f"[{i}] node {n.node_id} {HOST}:{n.port} controller {n.controller_port} pid {n.pid} {state}")
    print(f"KAFKA_BOOTSTRAP_SERVERS={h.bootstrap}")


def _cluster_cmd(args: argparse.Namespace) -> None:
    if args.action == "start":
        h = start_cluster(
            args.size, args.data_dir, ports=args.ports,
            controller_ports=args.controller_ports, timeout=args.timeout, detach=True,
        )  # fmt: skip
        print(f"KAFKA_BOOTSTRAP_SERVERS={h.bootstrap}")
        print(f"pids {h.pids}")
    elif args.action == "stop":
        print(f"stopped kafka pids {stop_dir(args.data_dir)}, removed {args.data_dir}")
    elif args.action == "status":
        _status(args.data_dir)
    else:
        if args.index is None:
            raise ValueError(f"cluster {args.action} needs a broker index")
        h = attach(args.data_dir)
        if args.action == "kill":
            h.kill(args.index)
            print(f"killed broker {args.index} (kill -9)")
        else:
            secs = h.restart(args.index, args.timeout)
            print(f"restarted broker {args.index} (pid {h.nodes[args.index].pid}), listed again after {secs:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
