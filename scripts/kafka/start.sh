#!/usr/bin/env bash
# Thin entry point: `python3 scripts/kafka/localkafka.py start "$@"` (see docs/kafka.md).
set -euo pipefail
exec "${PYTHON:-python3}" "$(dirname "$0")/localkafka.py" start "$@"
