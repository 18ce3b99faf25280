#!/usr/bin/env bash
# Idempotent set-up shared by the README's two commands (scripts/demo.sh, scripts/test.sh) and CI.
#
#   1. python venv   : $STREAMPROC_VENV (default .venv), created with python3.11 when missing
#   2. package       : pip install -e '.[test]' when pyproject.toml changed since the last install
#                      (the test extra brings the Compose Specification's JSON schema, inside
#                      check-jsonschema, for tests/unit/test_compose.py)
#   3. native        : the compiled hot path (Cython, setup.py build_ext --inplace) rebuilt when a
#                      compiled module's source changed (streamproc runs a stale one from source)
#   4. kafka jars    : python -m scripts.kafka.localkafka install (mvn; no download once cached)
#   5. spark jars    : python -m scripts.spark.fetch_jars (the Spark connector; no download once cached)
#   6. kafka-streams : tests/conformance (Kafka Streams jars via mvn, its Java runner via javac)
#   7. mermaid       : python -m tests.support.mermaid install (Mermaid's parser, npm; for
#                      tests/unit/test_describe_mermaid.py; no download once cached)
#
# Caches live outside git: $STREAMPROC_CACHE (default ~/.cache/streamproc).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${STREAMPROC_VENV:-.venv}"

step() { printf '\n== setup: %s ==\n' "$*"; }

find_python() {
  for candidate in "${PYTHON:-}" python3.11 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  echo "setup: need Python >= 3.11 (python3.11 not found)" >&2
  return 1
}

setup_venv() {
  if [ ! -x "$VENV/bin/python" ]; then
    step "python venv ($VENV)"
    "$(find_python)" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
  fi
}

install_package() {
  local stamp="$VENV/.streamproc-installed" want
  want="$(sha256sum pyproject.toml | cut -d' ' -f1) $(pwd)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] ||
     ! "$VENV/bin/python" -c 'import streamproc, aiokafka, pytest, hypothesis, yaml, jsonschema, check_jsonschema' 2>/dev/null; then
    step "pip install -e '.[test]'"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[test]'
    echo "$want" > "$stamp"
  fi
}

build_native() {
  # Once per state of the sources: a machine without a C compiler runs everything from source.
  local stamp="$VENV/.streamproc-native" want
  want="$(cat setup.py streamproc/_native.py streamproc/*.py streamproc/*/*.py streamproc/*/*.pxd | sha256sum | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
  if ! env -u STREAMPROC_PURE_PYTHON "$VENV/bin/python" -m streamproc.cli native --check >/dev/null 2>&1; then
    step "compiled hot path (setup.py build_ext --inplace)"
    "$VENV/bin/python" setup.py -q build_ext --inplace 2>&1 | grep -v '^warning: \|^Compiling \|^\[' || true
    "$VENV/bin/python" -m streamproc.cli native | tail -n 1
  fi
  echo "$want" > "$stamp"
}

fetch_kafka_jars() {
  step "kafka jars (Maven Central)"
  "$VENV/bin/python" -m scripts.kafka.localkafka install
}

# Hook owned by the Spark work: fetch the spark-sql-kafka connector jars for PySpark.
fetch_spark_jars() {
  if [ -f scripts/spark/fetch_jars.py ]; then
    step "spark kafka-connector jars (Maven Central)"
    "$VENV/bin/python" -m scripts.spark.fetch_jars
  fi
}

# Kafka Streams' own TopologyTestDriver for tests/conformance (mvn jars + javac of the runner; no
# download or compile once cached).
fetch_kafka_streams_conformance() {
  step "kafka-streams jars + conformance runner (Maven Central, javac)"
  "$VENV/bin/python" -m tests.conformance.kafka_streams install
}

# Mermaid's own parser (npm) for the describe --format mermaid test.
fetch_mermaid() {
  step "mermaid parser (npm)"
  "$VENV/bin/python" -m tests.support.mermaid install
}

setup_venv
install_package
build_native
fetch_kafka_jars
fetch_spark_jars
fetch_kafka_streams_conformance
fetch_mermaid
