#!/usr/bin/env python3
"""Fetch the Spark Kafka connector jars into the streamproc cache (see streamproc/spark/jars.py).

    .venv/bin/python -m scripts.spark.fetch_jars            # idempotent; prints the jar paths
    STREAMPROC_CACHE=/tmp/c .venv/bin/python -m scripts.spark.fetch_jars
"""

import sys

from streamproc.spark.jars import main

if __name__ == "__main__":
    sys.exit(main())
