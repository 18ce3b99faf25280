"""Starting, measuring and stopping one peer process; py-spy attached to it on request."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import jvm, venvs
from .common import session_store_retention

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")


try:
    import ctypes

    _prctl: Any = ctypes.CDLL("libc.so.6", use_errno=True).prctl  # loaded here, not in the child
except OSError:  # not glibc Linux
    _prctl = None


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the harness dies (Linux ``PR_SET_PDEATHSIG``), so a
    killed harness leaves no peer behind. Only calls the already loaded function (fork-safe)."""
    if _prctl is not None:
        _prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class PeerRun:
    """What a peer is asked to do in one run."""

    peer: str
    bootstrap: str
    group: str
    source: str
    sink: str
    gap_ms: int
    grace_ms: int
    partitions: int
    workdir: Path


def command(run: PeerRun) -> tuple[list[str], dict[str, str]]:
    """The argv and extra environment of a peer."""
    env: dict[str, str] = {}
    if run.peer == "streamproc":
        exe = str(Path(sys.executable).parent / "streamproc")
        env = {"PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               "BENCH_INPUT": run.source, "BENCH_OUTPUT": run.sink,
               "BENCH_GAP_MS": str(run.gap_ms), "BENCH_GRACE_MS": str(run.grace_ms)}
        return [exe, "run", "benchmarks.peers.streamproc_sessions", "--bootstrap-servers", run.bootstrap,
                "--application-id", run.group, "--commit-interval-ms", "1000", "--log-level", "WARNING"], env
    if run.peer == "passthrough":
        return [sys.executable, "-m", "benchmarks.peers.passthrough", "--bootstrap", run.bootstrap, "--group", run.group,
                "--input", run.source, "--output", run.sink], env
    if run.peer in ("quix", "quix-key"):
        state = run.workdir / f"quix-state-{run.group}"
        return [str(venvs.python("quix")), str(HERE / "quix_app.py"), "--bootstrap", run.bootstrap,
                "--group", run.group, "--input", run.source, "--output", run.sink, "--gap-ms", str(run.gap_ms),
                "--grace-ms", str(run.grace_ms), "--state-dir", str(state), "--closing", "key" if run.peer == "quix-key" else "partition"], env
    if run.peer.startswith("kstreams"):
        # JVM defaults (heap, GC) as a user gets them; slf4j-simple at WARN keeps the log short
        cache = ["--cache-bytes", "0"] if run.peer == "kstreams-nocache" else []
        store = ["--store", "rocksdb"] if run.peer == "kstreams-rocksdb" else []
        return ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", jvm.classpath(), jvm.MAIN_CLASS,
                "--bootstrap", run.bootstrap, "--application-id", run.group, "--input", run.source,
                "--output", run.sink, "--gap-ms", str(run.gap_ms), "--grace-ms", str(run.grace_ms),
                "--state-dir", str(run.workdir / f"kstreams-state-{run.group}"), "--commit-interval-ms", "1000",
                "--retention-ms", str(session_store_retention(run.gap_ms, run.grace_ms)), *cache, *store], env
    if run.peer == "bytewax":
        return [str(venvs.python("bytewax")), str(HERE / "bytewax_app.py"), "--bootstrap", run.bootstrap,
                "--input", run.source, "--output", run.sink, "--gap-ms", str(run.gap_ms),
                "--grace-ms", str(run.grace_ms), "--ready-file", str(ready_file(run))], env
    if run.peer == "faust":
        return [str(venvs.python("faust")), str(HERE / "faust_app.py"), "--bootstrap", run.bootstrap,
                "--app-id", run.group, "--input", run.source, "--output", run.sink, "--gap-ms", str(run.gap_ms),
                "--partitions", str(run.partitions), "--datadir", str(run.workdir / f"faust-data-{run.group}")], env
    raise ValueError(f"unknown peer {run.peer!r}")


def ready_file(run: PeerRun) -> Path:
    """Where a peer without a consumer group (Bytewax) writes the wall-clock time of its first record."""
    return run.workdir / f"{run.group}.ready"


class PeerProcess:
    """A running peer: CPU seconds so far (``/proc``), SIGTERM + wait4 for the totals."""

    def __init__(self, run: PeerRun, log: Path) -> None:
        argv, extra = command(run)
        self.log = log
        self._log_file = log.open("wb")
        self.argv = argv
        self.proc = subprocess.Popen(argv, cwd=REPO, env={**os.environ, **extra}, stdout=self._log_file,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=_die_with_parent)  # noqa: PLW1509 - fork-safe, see above
        self.pid = self.proc.pid
        self.rusage: Any = None
        self.returncode: int | None = None

    def alive(self) -> bool:
        """Still running (checked without reaping it, so ``stop`` still gets its rusage)."""
        if self.returncode is not None:
            return False
        return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None

    def cpu_seconds(self) -> float:
        """user + system CPU of the process (all its threads) so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM, wait (SIGKILL after ``timeout``); keeps ``rusage`` (CPU, peak RSS) of the process."""
        if self.returncode is None:
            if self.alive():
                os.kill(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while True:
                pid, status, rusage = os.wait4(self.pid, os.WNOHANG)
                if pid == self.pid:
                    self.rusage, self.returncode = rusage, os.waitstatus_to_exitcode(status)
                    break
                if time.monotonic() > deadline:
                    os.kill(self.pid, signal.SIGKILL)
                    deadline = time.monotonic() + 10
                time.sleep(0.05)
            self.proc.returncode = self.returncode
        self._log_file.close()

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class PySpy:
    """``py-spy record`` attached to a running pid (raw folded stacks), stopped with SIGINT."""

    def __init__(self, pid: int, out: Path, rate: int = 100) -> None:
        exe = venvs.root() / "tools" / "bin" / "py-spy"
        self.out = out
        self.proc = subprocess.Popen([str(exe), "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw",
                                      "--output", str(out), "--nonblocking"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                                     preexec_fn=_die_with_parent)  # noqa: PLW1509 - fork-safe, see above

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        if not self.out.exists():
            raise RuntimeError(f"py-spy wrote no profile: {err.decode(errors='replace')[-500:]}")
        return self.out.read_text()
