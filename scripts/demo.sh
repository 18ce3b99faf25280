#!/usr/bin/env bash
# The demo from a fresh clone: set-up (venv, package, Kafka jars; idempotent), then a real local
# Kafka broker, demo topics, sample click data, the sessions topology run on the streamproc daemon
# with its results printed (and checked against the TopologyTestDriver), the broker stopped again. Arguments go to scripts/demo_kafka.py (--users, --seed, --port).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
printf '\n== demo ==\n'
exec "${STREAMPROC_VENV:-.venv}/bin/python" -m scripts.demo_kafka "$@"
