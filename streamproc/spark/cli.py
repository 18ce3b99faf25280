"""``streamproc reprocess``: the command-line face of :func:`streamproc.spark.job.reprocess`.

``streamproc/cli.py`` registers it as one more :class:`streamproc.cli.Command`::

    from .spark.cli import add_reprocess_arguments, run_reprocess
    Command("reprocess", "re-run a topology over history on Spark", add_reprocess_arguments, run_reprocess)

(or, with a bare ``argparse`` sub-parsers object, :func:`add_reprocess_parser`, which sets
``func=run_reprocess``). ``run_reprocess(args)`` returns the exit status: 0 done, 2 bad request.
Importing this module does not import PySpark.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import tempfile
import warnings
from typing import Any

from .ordering import ORDERS
from .sources import ENCODINGS

__all__ = ["add_reprocess_parser", "main", "run_reprocess"]

_EPILOG = """\
SOURCE: kafka:TOPIC (batch read, earliest to latest) | json:PATH | parquet:PATH | PATH.
Files have columns key, value, timestamp (ms), partition, offset; key/value are the record's
bytes as UTF-8 text (--encoding text), base64 (--encoding base64) or Parquet binary.
DEST: DIR | parquet:DIR | json:DIR (writes DIR/table and, with --updates, DIR/updates) or
kafka:TOPIC ({topic} is replaced by each sink topic's name).

examples:
  streamproc reprocess topologies.sessions --input clicks=kafka:clicks \\
      --bootstrap-servers localhost:9092 --output out/sessions --order event-time --updates
  streamproc reprocess topologies.currency --input rates=rates.jsonl --input payments=payments/ \\
      --output kafka:{topic}-reprocessed --bootstrap-servers localhost:9092
"""


def _kv(text: str, option: str) -> tuple[str, str]:
    k, sep, v = text.partition("=")
    if not sep or not k:
        raise ValueError(f"{option} {text!r} must be KEY=VALUE")
    return k.strip(), v


#: Spark master URLs ``--master`` accepts (Spark's own forms; Mesos is gone since Spark 4).
_MASTER = re.compile(
    r"""^(?:local(?:\[(?:\*|[1-9]\d*)(?:,\s*[1-9]\d*)?\])?     # local, local[N], local[*], local[N,F]
        |local-cluster\[[1-9]\d*,\s*[1-9]\d*,\s*[1-9]\d*\]   # local-cluster[workers,cores,MiB]
        |spark://[^\s:/,]+:\d+(?:,[^\s:/,]+:\d+)*              # standalone (HA: several masters)
        |yarn
        |k8s://\S+)$""", re.VERBOSE)


def check_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """Check the arguments that need neither the topology nor Spark; return the parsed
    ``conf`` and ``kafka_options`` dicts. Raises ``ValueError`` with one line naming the argument,
    its value and what to do."""
    if args.master is not None and not _MASTER.match(args.master):
        raise ValueError(f"--master {args.master!r} is not a Spark master URL; use local[N], local[*], "
                         "spark://HOST:PORT, yarn or k8s://https://HOST:PORT")
    conf: dict[str, str] = {}
    for text in args.conf:
        k, v = _kv(text, "--conf")
        if not k.startswith("spark."):
            raise ValueError(f"--conf {text!r}: Spark settings start with 'spark.' (Spark ignores {k!r}); "
                             "Kafka client options go to --kafka-option")
        conf[k] = v
    kafka_options = dict(_kv(text, "--kafka-option") for text in args.kafka_option)
    if args.repartition_partitions is not None and args.repartition_partitions < 1:
        raise ValueError(f"--repartition-partitions {args.repartition_partitions}: must be at least 1")
    if args.application_id is not None and not args.application_id.strip():
        raise ValueError("--application-id is empty; give a name or leave it out (default: the module's last name)")
    if args.rejects and os.path.isfile(args.rejects):
        raise ValueError(f"--rejects {args.rejects!r} is a file; give a directory")
    return {"conf": conf, "kafka_options": kafka_options}


def check_output(output: Any, encoding: str) -> None:
    """Checks of ``--output`` that need no Spark: a binary encoding needs Parquet, ``{topic}``
    at most once in a Kafka topic, a directory destination that is not an existing file."""
    if output.kind == "json" and encoding == "binary":
        raise ValueError("--encoding binary needs Parquet output (JSON has no bytes type); "
                         "use parquet:DIR or --encoding text/base64")
    if output.kind == "kafka" and output.location.count("{topic}") > 1:
        raise ValueError(f"--output kafka:{output.location}: '{{topic}}' may appear once")
    if output.kind != "kafka" and os.path.isfile(output.location):
        raise ValueError(f"--output {output.location!r} is a file; give a directory (DIR/table and DIR/updates "
                         "are written inside it)")


def add_reprocess_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``reprocess`` sub-command to an ``argparse`` sub-parsers object."""
    p = subparsers.add_parser(
        "reprocess", help="re-run a topology over history on Spark",
        description="Re-run a topology's own operators and stores over recorded input on Spark "
                    "and write the final table (and the update stream).",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_reprocess_arguments(p)
    p.set_defaults(func=run_reprocess)
    return p


def add_reprocess_arguments(p: argparse.ArgumentParser) -> None:
    """Add reprocess's arguments (and its epilog) to ``p``."""
    p.epilog = _EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("module", metavar="MODULE[:ATTR]",
                   help="topology module (exposes build() or topology), e.g. topologies.sessions")
    p.add_argument("--input", "-i", action="append", required=True, metavar="TOPIC=SOURCE",
                   help="a source topic of the topology and where its records are (repeat per topic)")
    p.add_argument("--output", "-o", required=True, metavar="DEST", help="where the results go")
    p.add_argument("--order", choices=ORDERS, default="offset",
                   help="offset: replay each partition in offset order (equals the live daemon); "
                        "event-time: each key's records in timestamp order (no late drops)")
    p.add_argument("--updates", action="store_true", help="also write the full update stream")
    p.add_argument("--bootstrap-servers", "-b", metavar="HOST:PORT[,...]", help="Kafka, for kafka: sources/dest")
    p.add_argument("--rejects", metavar="DIR",
                   help="where unreadable records go (default DEST/_rejects, or ./streamproc-rejects for Kafka)")
    p.add_argument("--encoding", choices=ENCODINGS, default="text",
                   help="key/value strings in files: UTF-8 text or base64 (binary: Parquet bytes out)")
    p.add_argument("--master", metavar="URL",
                   help="Spark master: local[N], spark://HOST:PORT, yarn, k8s://... (default local[2], or "
                        "what spark-submit set when run under it)")
    p.add_argument("--application-id", help="names internal topics (default: the module's last name)")
    p.add_argument("--repartition-partitions", type=int, metavar="N",
                   help="partitions of repartition topics (default: as many as the writer's inputs)")
    p.add_argument("--overwrite", action="store_true", help="replace existing output directories")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark configuration (repeatable), e.g. spark.executor.memory=4g")
    p.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark Kafka source/sink option, e.g. kafka.security.protocol=SSL")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="show Spark's and py4j's own output (JVM log, progress bar) on the console; by default "
                        "it goes to a log file named only when the job fails")


def _master(args: argparse.Namespace) -> str | None:
    """The master to ask for: ``--master``; else None under ``spark-submit`` (its master holds; it
    starts this process with ``PYSPARK_GATEWAY_PORT`` set); else ``local[2]``."""
    if args.master:
        return str(args.master)
    return None if os.environ.get("PYSPARK_GATEWAY_PORT") else "local[2]"


def _error(exc: BaseException | str) -> int:
    print(f"streamproc reprocess: error: {exc}", file=sys.stderr)
    return 2


def _first_line(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)  # py4j's Py4JJavaError: the Java exception says more
    text = str(java.toString() if java is not None else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def run_reprocess(args: argparse.Namespace) -> int:
    """Run ``reprocess`` for parsed ``args``; print the summary; return the exit status: 0 done,
    2 a bad request (one line on stderr, found before Spark starts: see :mod:`.preflight`), 1 the
    Spark job failed (one line, and where Spark's log is unless ``--verbose``)."""
    import importlib.util

    from .preflight import PreflightError, preflight
    from .sources import parse_input, parse_output

    verbose = bool(getattr(args, "verbose", False))
    try:
        checked = check_arguments(args)
        inputs = [parse_input(s) for s in args.input]
        output = parse_output(args.output)
        check_output(output, args.encoding)
        missing = [m for m in ("pyspark", "pyarrow", "pandas") if importlib.util.find_spec(m) is None]
        if missing:
            raise ValueError(f"{' and '.join(missing)} not installed: pip install 'streamproc[spark]'")
        preflight(args.module, inputs, output, args.bootstrap_servers, args.overwrite, args.updates,
                  args.application_id)
    except (ValueError, PreflightError) as exc:
        return _error(exc)
    from .job import reprocess
    from .session import spark_session

    needs_kafka = output.kind == "kafka" or any(s.kind == "kafka" for s in inputs)
    conf = checked["conf"]
    log_file = None
    if verbose:
        if not args.quiet:
            conf.setdefault("spark.ui.showConsoleProgress", "true")
    else:
        fd, log_file = tempfile.mkstemp(prefix="streamproc-reprocess-", suffix=".log")
        os.close(fd)
        logging.getLogger("py4j").setLevel(logging.ERROR)
        warnings.filterwarnings("ignore", module=r"pyspark(\..*)?$")
    log_hint = f" (Spark's log: {log_file}; --verbose shows it on the console)" if log_file else ""
    try:
        spark = spark_session(_master(args), kafka=needs_kafka, conf=conf, log_file=log_file)
    except Exception as exc:  # noqa: BLE001 - a master that cannot be reached, a JVM that does not start
        print(f"streamproc reprocess: failed: Spark did not start: {type(exc).__name__}: {_first_line(exc)}"
              f"{log_hint}", file=sys.stderr)
        return 1
    try:
        result = reprocess(
            spark, args.module, inputs, output, order=args.order, updates=args.updates,
            bootstrap_servers=args.bootstrap_servers, rejects=args.rejects, encoding=args.encoding,
            application_id=args.application_id, repartition_partitions=args.repartition_partitions,
            overwrite=args.overwrite, kafka_options=checked["kafka_options"], quiet=args.quiet)
    except (ValueError, ImportError) as exc:
        return _error(exc)
    except Exception as exc:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException

        if not isinstance(exc, (PySparkException, Py4JError)):
            raise
        print(f"streamproc reprocess: failed: {type(exc).__name__}: {_first_line(exc)}{log_hint}", file=sys.stderr)
        return 1
    print(result.summary())
    if log_file:
        try:
            os.unlink(log_file)
            os.unlink(log_file + ".log4j2.properties")
        except OSError:
            pass
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python -m streamproc.spark.cli ...``), same arguments."""
    parser = argparse.ArgumentParser(prog="streamproc reprocess", epilog=_EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_reprocess_arguments(parser)
    return run_reprocess(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
