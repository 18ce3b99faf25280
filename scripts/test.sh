#!/usr/bin/env bash
# The full test suite from a fresh clone: idempotent set-up (scripts/setup.sh), then pytest.
# Extra arguments go to pytest, e.g.  bash scripts/test.sh tests/unit -x
# Kafka tests use a local broker the fixtures start (or $KAFKA_BOOTSTRAP_SERVERS when set).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || { echo "test.sh: set-up failed" >&2; exit 1; }
VENV="${STREAMPROC_VENV:-.venv}"

printf '\n== pytest ==\n'
"$VENV/bin/python" -m pytest -ra --durations=15 --timeout=600 "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; that counts as a failure" >&2
  exit 1
fi
exit "$rc"
