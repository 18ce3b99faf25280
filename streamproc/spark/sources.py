"""Input and output locations of ``streamproc reprocess`` and how their records are encoded.

Input: ``TOPIC=SOURCE`` where TOPIC is a source topic of the topology and SOURCE is

- ``kafka:NAME``: a Spark batch read of Kafka topic NAME, earliest to latest offsets (all partitions);
- ``json:PATH`` or ``parquet:PATH``: files (a file, a directory, or a glob);
- a bare ``PATH``: Parquet when the path ends in ``.parquet`` or is a directory holding ``*.parquet``
  files, else JSON lines.

File records have the columns ``key, value, timestamp, partition, offset`` (extra columns are
ignored). ``timestamp`` is epoch milliseconds. ``key``/``value`` hold the record's Kafka bytes:

- a Parquet ``binary`` column: the bytes as they are;
- a string (JSON lines always; Parquet ``string`` columns): with ``--encoding text`` (default) the
  UTF-8 text of the bytes (what the JSON and string serdes write, e.g. ``"{\\"page\\":\\"/a\\"}"``),
  with ``--encoding base64`` the base64 of the bytes (for binary serdes);
- ``null``: a Kafka null (a tombstone value / no key).

A file row that cannot be read (malformed JSON, missing or non-integer ``timestamp``, ``partition``
or ``offset``, invalid base64) becomes a reject; it never stops the job.

Output: ``kafka:TOPIC`` (``{topic}`` in TOPIC is replaced by the sink topic's name), or a directory
(``json:DIR``, ``parquet:DIR``, or a bare ``DIR`` = Parquet) receiving ``table/`` and ``updates/``.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "ENCODINGS",
    "INPUT_COLUMNS",
    "InputSpec",
    "OutputSpec",
    "encode_column",
    "parse_input",
    "parse_output",
    "read_input",
]

ENCODINGS = ("text", "base64", "binary")
INPUT_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value", "error", "source")

Kind = Literal["kafka", "json", "parquet"]


@dataclass(frozen=True)
class InputSpec:
    """One ``--input TOPIC=SOURCE``."""

    topic: str
    kind: Kind
    location: str

    def __str__(self) -> str:
        return f"{self.topic}={self.kind}:{self.location}"


@dataclass(frozen=True)
class OutputSpec:
    """The ``--output DEST``."""

    kind: Kind
    location: str


def _file_kind(path: str) -> Kind:
    if path.endswith(".parquet"):
        return "parquet"
    if os.path.isdir(path) and (glob.glob(os.path.join(path, "*.parquet")) or
                                glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True)):
        return "parquet"
    return "json"


def _split(text: str, what: str) -> tuple[Kind | None, str]:
    for prefix in ("kafka", "json", "parquet"):
        if text.startswith(prefix + ":"):
            rest = text[len(prefix) + 1:]
            if not rest:
                raise ValueError(f"{what} {text!r}: nothing after '{prefix}:'")
            return prefix, rest  # type: ignore[return-value]
    if not text:
        raise ValueError(f"{what} is empty")
    return None, text


def parse_input(text: str) -> InputSpec:
    """Parse ``TOPIC=SOURCE``; ``ValueError`` naming the argument when malformed."""
    topic, sep, source = text.partition("=")
    if not sep or not topic or not source:
        raise ValueError(f"--input {text!r} must be TOPIC=SOURCE (kafka:NAME, json:PATH, parquet:PATH or PATH)")
    kind, loc = _split(source, f"--input {text!r} source")
    if kind is None and "://" in loc:
        raise ValueError(f"--input {text!r}: a URL needs its format: {topic}=parquet:{loc} or {topic}=json:{loc}")
    if kind is None:
        if not glob.glob(loc):
            raise ValueError(f"--input {text!r}: no file or directory matches {loc!r}")
        kind = _file_kind(loc)
    return InputSpec(topic, kind, loc)


def parse_output(text: str) -> OutputSpec:
    """Parse DEST: ``kafka:TOPIC`` (``{topic}`` allowed), ``json:DIR``, ``parquet:DIR`` or ``DIR``."""
    kind, loc = _split(text, "--output")
    return OutputSpec(kind or "parquet", loc)


def _decode_column(F: Any, column: Any, dtype: str, encoding: str) -> tuple[Any, Any]:
    """(binary column, error-or-null column) for a key/value column of a file."""
    if dtype == "binary":
        return column, F.lit(None)
    if encoding == "base64":
        decoded = F.try_to_binary(column, F.lit("base64"))
        bad = F.when(column.isNotNull() & decoded.isNull(), F.lit("invalid base64"))
        return decoded, bad
    return F.encode(column, "UTF-8"), F.lit(None)


def read_input(spark: Any, spec: InputSpec, *, encoding: str = "text", bootstrap_servers: str | None = None,
               kafka_options: dict[str, str] | None = None) -> Any:
    """A DataFrame with :data:`INPUT_COLUMNS` for one input (rejects have a non-null ``error``)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r}; choose one of {ENCODINGS}")
    if spec.kind == "kafka":
        if not bootstrap_servers:
            raise ValueError(f"--input {spec}: a Kafka source needs --bootstrap-servers")
        reader = (spark.read.format("kafka")
                  .option("kafka.bootstrap.servers", bootstrap_servers)
                  .option("subscribe", spec.location)
                  .option("startingOffsets", "earliest")
                  .option("endingOffsets", "latest"))
        for k, v in (kafka_options or {}).items():
            reader = reader.option(k, v)
        df = reader.load()
        return df.select(
            F.lit(spec.topic).alias("topic"),
            F.col("partition").cast("int").alias("partition"),
            F.col("offset").cast("long").alias("offset"),
            F.unix_millis(F.col("timestamp")).alias("timestamp"),
            F.col("key"), F.col("value"),
            F.lit(None).cast("string").alias("error"),
            F.lit(f"kafka:{spec.location}").alias("source"),
        )

    if spec.kind == "json":
        schema = T.StructType([
            T.StructField("key", T.StringType()), T.StructField("value", T.StringType()),
            T.StructField("timestamp", T.LongType()), T.StructField("partition", T.IntegerType()),
            T.StructField("offset", T.LongType()), T.StructField("_corrupt_record", T.StringType()),
        ])
        df = (spark.read.schema(schema).option("mode", "PERMISSIVE")
              .option("columnNameOfCorruptRecord", "_corrupt_record").json(spec.location))
        types = {"key": "string", "value": "string"}
        corrupt = F.col("_corrupt_record")
    else:
        df = spark.read.parquet(spec.location)
        missing = [c for c in ("key", "value", "timestamp", "partition", "offset") if c not in df.columns]
        if missing:
            raise ValueError(f"--input {spec}: Parquet files lack the column(s) {missing}; "
                             f"they have {df.columns}")
        types = dict(df.dtypes)
        for c in ("key", "value"):
            if types[c] not in ("binary", "string"):
                raise ValueError(f"--input {spec}: column {c!r} must be binary or string, got {types[c]}")
        corrupt = F.lit(None).cast("string")
    key, key_bad = _decode_column(F, F.col("key"), types["key"], encoding)
    value, value_bad = _decode_column(F, F.col("value"), types["value"], encoding)
    ts = F.col("timestamp").cast("long") if spec.kind == "parquet" else F.col("timestamp")
    part = F.col("partition").cast("int") if spec.kind == "parquet" else F.col("partition")
    off = F.col("offset").cast("long") if spec.kind == "parquet" else F.col("offset")
    error = (F.when(corrupt.isNotNull(), F.concat(F.lit("malformed record: "), F.substring(corrupt, 1, 500)))
             .when(ts.isNull(), F.lit("missing or non-integer 'timestamp'"))
             .when(part.isNull() | (part < 0), F.lit("missing, negative or non-integer 'partition'"))
             .when(off.isNull() | (off < 0), F.lit("missing, negative or non-integer 'offset'"))
             .when(key_bad.isNotNull(), F.concat(F.lit("key: "), key_bad))
             .when(value_bad.isNotNull(), F.concat(F.lit("value: "), value_bad)))
    return df.select(
        F.lit(spec.topic).alias("topic"), part.alias("partition"), off.alias("offset"), ts.alias("timestamp"),
        key.alias("key"), value.alias("value"), error.alias("error"),
        F.col("_metadata.file_path").alias("source"),
    )


def encode_column(F: Any, column: Any, encoding: str) -> Any:
    """A binary column as written to output files: UTF-8 text, base64 text, or raw binary."""
    if encoding == "base64":
        return F.base64(column)
    if encoding == "binary":
        return column
    return column.cast("string")
