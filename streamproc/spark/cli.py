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
import sys
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


def _kv(text: str) -> tuple[str, str]:
    k, sep, v = text.partition("=")
    if not sep or not k:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return k, v


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
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--application-id", help="names internal topics (default: the module's last name)")
    p.add_argument("--repartition-partitions", type=int, metavar="N",
                   help="partitions of repartition topics (default: as many as the writer's inputs)")
    p.add_argument("--overwrite", action="store_true", help="replace existing output directories")
    p.add_argument("--conf", action="append", type=_kv, default=[], metavar="KEY=VALUE",
                   help="extra Spark configuration (repeatable)")
    p.add_argument("--kafka-option", action="append", type=_kv, default=[], metavar="KEY=VALUE",
                   help="extra Spark Kafka source/sink option, e.g. kafka.security.protocol=SSL")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")


def run_reprocess(args: argparse.Namespace) -> int:
    """Run ``reprocess`` for parsed ``args``; print the summary; return the exit status."""
    from .preflight import PreflightError, preflight
    from .sources import parse_input, parse_output

    try:
        inputs = [parse_input(s) for s in args.input]
        output = parse_output(args.output)
        preflight(args.module, inputs, output, args.bootstrap_servers, args.overwrite, args.updates,
                  args.application_id)
    except (ValueError, PreflightError) as exc:
        print(f"streamproc reprocess: error: {exc}", file=sys.stderr)
        return 2
    from .job import reprocess
    from .session import spark_session

    needs_kafka = output.kind == "kafka" or any(s.kind == "kafka" for s in inputs)
    conf = dict(args.conf)
    if not args.quiet:
        conf.setdefault("spark.ui.showConsoleProgress", "true")
    spark = spark_session(args.master, kafka=needs_kafka, conf=conf)
    try:
        result = reprocess(
            spark, args.module, inputs, output, order=args.order, updates=args.updates,
            bootstrap_servers=args.bootstrap_servers, rejects=args.rejects, encoding=args.encoding,
            application_id=args.application_id, repartition_partitions=args.repartition_partitions,
            overwrite=args.overwrite, kafka_options=dict(args.kafka_option), quiet=args.quiet)
    except (ValueError, ImportError) as exc:
        print(f"streamproc reprocess: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        from pyspark.errors import PySparkException

        if not isinstance(exc, PySparkException):
            raise
        print(f"streamproc reprocess: failed: {type(exc).__name__}: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    print(result.summary())
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python -m streamproc.spark.cli ...``), same arguments."""
    parser = argparse.ArgumentParser(prog="streamproc reprocess", epilog=_EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_reprocess_arguments(parser)
    return run_reprocess(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
