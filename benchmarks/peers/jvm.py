"""The Kafka Streams peer's build: ``peers/kstreams/`` (pom + one Java class) compiled with ``mvn``.

``ensure()`` runs ``mvn package`` on ``benchmarks/peers/kstreams/pom.xml`` with the build directory
in the cache (``$STREAMPROC_CACHE`` or ``~/.cache/streamproc``, then ``kstreams-peer/``): the
compiled class in ``classes/``, kafka-streams and its runtime dependencies (from Maven Central, via
``mvn``'s local repository) in ``libs/``. A stamp holds the digest of the pom and the Java sources,
so a second call builds nothing; a changed source rebuilds. ``classpath()`` is what ``java -cp``
gets. Needs a JDK 17 and Maven 3.8+ on PATH (the same ones the local Kafka needs).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent / "kstreams"
MAIN_CLASS = "streamproc.bench.KStreamsSessions"


def build_dir() -> Path:
    env = os.environ.get("STREAMPROC_CACHE")
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "streamproc") / "kstreams-peer"


def _digest() -> str:
    h = hashlib.sha256()
    for f in sorted([PROJECT / "pom.xml", *(PROJECT / "src").rglob("*.java")]):
        h.update(str(f.relative_to(PROJECT)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def kafka_streams_version() -> str:
    """The kafka-streams version the pom pins (``<kafka.version>``)."""
    text = (PROJECT / "pom.xml").read_text()
    return text.split("<kafka.version>", 1)[1].split("<", 1)[0].strip()


def classpath() -> str:
    out = build_dir()
    return f"{out / 'classes'}{os.pathsep}{out / 'libs'}/*"


def ensure(quiet: bool = False) -> str:
    """The peer's ``java -cp`` classpath, building it first unless the stamp matches the sources.

    Raises :class:`RuntimeError` naming a missing tool, or with mvn's output when the build fails.
    """
    out = build_dir()
    stamp = out / ".built-sha256"
    digest = _digest()
    if stamp.is_file() and stamp.read_text().strip() == digest and any((out / "libs").glob("kafka-streams-*.jar")):
        return classpath()
    missing = [t for t in ("java", "mvn") if shutil.which(t) is None]
    if missing:
        raise RuntimeError(f"{', '.join(missing)} not on PATH: the Kafka Streams peer needs a JDK 17 and Maven 3.8+")
    if not quiet:
        print(f"building the Kafka Streams peer (kafka-streams {kafka_streams_version()}) into {out} with mvn",
              flush=True)
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.monotonic()
    proc = subprocess.run(["mvn", "-B", "-q", "-f", str(PROJECT / "pom.xml"), f"-Dpeer.build.dir={out}",
                           "-DskipTests", "package"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"mvn failed ({proc.returncode}) building {PROJECT}:\n" + (proc.stdout + proc.stderr)[-4000:])
    stamp.write_text(digest + "\n")
    if not quiet:
        print(f"built the Kafka Streams peer in {time.monotonic() - t0:.1f} s "
              f"({len(list((out / 'libs').glob('*.jar')))} jars)", flush=True)
    return classpath()


if __name__ == "__main__":
    print(ensure())
