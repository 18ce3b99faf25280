"""Locate (and fetch) the jars Spark needs to read and write Kafka.

PySpark ships Spark itself but not the Kafka connector ``org.apache.spark:spark-sql-kafka-0-10_2.13``.
:func:`fetch_jars` resolves the connector for the installed PySpark version and its runtime
dependencies from Maven Central with ``mvn dependency:copy-dependencies`` (a generated pom), keeps only
the jars PySpark does not already ship (so no library is on the classpath twice) and stores them in
``$STREAMPROC_CACHE/spark-kafka-<pyspark version>/`` (default ``~/.cache/streamproc``). A cache marked
complete is reused without touching the network.

Fallbacks, each announced on stderr and recorded in the cache's ``MANIFEST``:

- if the connector for the exact PySpark version is not on Maven Central (PyPI can be ahead of
  Central), the newest connector release of the same major version that is not newer is used;
- if the connector's own ``spark-token-provider-kafka-0-10`` of that version is missing, the newest
  release of it that is not newer is used in its place (a small module: Kafka auth config helpers).

``SPARK_KAFKA_VERSION`` forces a connector version (no fallback).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

__all__ = ["SCALA", "cache_root", "fetch_jars", "installed_jars", "jar_dir", "main"]

SCALA = "2.13"
CENTRAL = "https://repo.maven.apache.org/maven2"
CONNECTOR = f"spark-sql-kafka-0-10_{SCALA}"
TOKEN_PROVIDER = f"spark-token-provider-kafka-0-10_{SCALA}"
_MARKER = ".complete"

_SETTINGS = """<settings><mirrors><mirror>
  <id>spark-gcs-to-central</id><mirrorOf>gcs-maven-central-mirror</mirrorOf>
  <url>https://repo.maven.apache.org/maven2</url>
</mirror></mirrors></settings>
"""


def _pyspark() -> tuple[str, Path]:
    import pyspark

    return pyspark.__version__, Path(pyspark.__file__).parent / "jars"


def cache_root() -> Path:
    """``$STREAMPROC_CACHE`` or ``~/.cache/streamproc``."""
    return Path(os.environ.get("STREAMPROC_CACHE") or Path.home() / ".cache" / "streamproc")


def jar_dir(version: str | None = None) -> Path:
    """The cache directory for the Kafka jars of Spark ``version`` (default: the installed PySpark)."""
    return cache_root() / f"spark-kafka-{version or _pyspark()[0]}"


def installed_jars(version: str | None = None) -> list[Path] | None:
    """The cached jars (sorted), or None when the cache is missing or incomplete."""
    d = jar_dir(version)
    if not (d / _MARKER).is_file():
        return None
    return sorted(d.glob("*.jar"))


def _artifact(jar_name: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients`` (drop ``-<version...>.jar``)."""
    stem = jar_name.removesuffix(".jar")
    return re.sub(r"-\d[A-Za-z0-9.]*(-[A-Za-z0-9.]+)*$", "", stem)


def _vtuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def _releases(artifact: str) -> list[str]:
    """Release versions (x.y.z, no previews) of ``org.apache.spark:artifact`` listed on Central."""
    url = f"{CENTRAL}/org/apache/spark/{artifact}/maven-metadata.xml"
    with urllib.request.urlopen(url, timeout=60) as resp:
        text = resp.read().decode("utf-8")
    return sorted(set(re.findall(r"<version>(\d+\.\d+\.\d+)</version>", text)), key=_vtuple)


def _newest_not_after(versions: list[str], limit: str, same_major: bool = True) -> str | None:
    ok = [v for v in versions if _vtuple(v) <= _vtuple(limit)
          and (not same_major or v.split(".")[0] == limit.split(".")[0])]
    return ok[-1] if ok else None


def _pom(connector: str, token: str | None) -> str:
    exclusion = token_dep = ""
    if token is not None:
        exclusion = (f"<exclusions><exclusion><groupId>org.apache.spark</groupId>"
                     f"<artifactId>{TOKEN_PROVIDER}</artifactId></exclusion></exclusions>")
        token_dep = (f"<dependency><groupId>org.apache.spark</groupId><artifactId>{TOKEN_PROVIDER}"
                     f"</artifactId><version>{token}</version></dependency>")
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>streamproc</groupId><artifactId>spark-kafka-jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.spark</groupId><artifactId>{CONNECTOR}</artifactId>
      <version>{connector}</version>{exclusion}</dependency>
    {token_dep}
  </dependencies>
</project>
"""


def _mvn_copy(work: Path, connector: str, token: str | None) -> tuple[bool, str]:
    (work / "pom.xml").write_text(_pom(connector, token))
    out = work / "jars"
    shutil.rmtree(out, ignore_errors=True)
    proc = subprocess.run(
        ["mvn", "-q", "-B", "-f", str(work / "pom.xml"), "-gs", str(work / "settings.xml"),
         "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={out}"],
        capture_output=True, text=True, check=False)
    return proc.returncode == 0, proc.stdout + proc.stderr


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def fetch_jars(version: str | None = None) -> list[Path]:
    """Return the connector jars for PySpark ``version``, downloading them on first use (idempotent)."""
    have, pyspark_jars = _pyspark()
    version = version or have
    cached = installed_jars(version)
    if cached:
        return cached
    if shutil.which("mvn") is None:
        raise RuntimeError("fetching the Spark Kafka connector needs Maven (`mvn`) on PATH")
    forced = os.environ.get("SPARK_KAFKA_VERSION")
    dest = jar_dir(version)
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="streamproc-jars-") as tmp:
        work = Path(tmp)
        (work / "settings.xml").write_text(_SETTINGS)
        connector = forced or version
        _say(f"fetching org.apache.spark:{CONNECTOR}:{connector} and its runtime dependencies ...")
        ok, log = _mvn_copy(work, connector, None)
        if not ok and not forced:
            fallback = _newest_not_after(_releases(CONNECTOR), version)
            if fallback and fallback != connector:
                notes.append(f"{CONNECTOR}:{version} is not on Maven Central; using {fallback}")
                _say("WARNING: " + notes[-1])
                connector = fallback
                ok, log = _mvn_copy(work, connector, None)
        if not ok and TOKEN_PROVIDER in log:
            token = _newest_not_after(_releases(TOKEN_PROVIDER), connector)
            if token and token != connector:
                notes.append(f"{TOKEN_PROVIDER}:{connector} is not on Maven Central; using {token}")
                _say("WARNING: " + notes[-1])
                ok, log = _mvn_copy(work, connector, token)
        if not ok:
            raise RuntimeError(f"mvn could not resolve {CONNECTOR}:{connector}:\n{log[-4000:]}")
        shipped = {_artifact(p.name) for p in pyspark_jars.glob("*.jar")}
        keep, skipped, size = [], [], 0
        for jar in sorted((work / "jars").glob("*.jar")):
            if _artifact(jar.name) in shipped:
                skipped.append(jar.name)
            else:
                keep.append(jar)
                size += jar.stat().st_size
        staging = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for jar in keep:
            shutil.copy2(jar, staging / jar.name)
        manifest = [f"pyspark {version}", f"connector {connector}", *(f"note {n}" for n in notes),
                    *(f"jar {j.name}" for j in keep), *(f"skipped-shipped {s}" for s in skipped)]
        (staging / "MANIFEST").write_text("\n".join(manifest) + "\n")
        (staging / _MARKER).write_text("")
        shutil.rmtree(dest, ignore_errors=True)
        staging.rename(dest)
    _say(f"downloaded {len(keep)} jars, {size / 1024 / 1024:.1f} MiB, into {dest}; "
         f"left out {len(skipped)} that pyspark already ships: {', '.join(skipped) or '-'}")
    for jar in keep:
        _say(f"  {jar.name}")
    return sorted(dest.glob("*.jar"))


def main(argv: list[str] | None = None) -> int:
    """CLI: fetch (if needed) and print the jar paths, one a line; the cache dir goes to stderr."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", help="Spark version (default: the installed PySpark's)")
    args = parser.parse_args(argv)
    try:
        jars = fetch_jars(args.version)
    except (RuntimeError, OSError) as exc:
        _say(f"fetch_jars: {exc}")
        return 2
    total = sum(p.stat().st_size for p in jars)
    _say(f"{len(jars)} jars ({total / 1024 / 1024:.1f} MiB) in {jar_dir(args.version)}")
    for p in jars:
        print(p)
    return 0
