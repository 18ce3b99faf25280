"""``python -m tests.conformance [--n N] [--seed S] [--op OP ...] [--show K]``: the long conformance run.

Prints, per operator, how many scenarios agreed with Kafka Streams and, per classifier, how many
differed deliberately; then up to ``--show`` unexplained differences. Exit status 1 when any
difference is unexplained.
"""

from __future__ import annotations

import argparse
import logging
import sys

from . import scenarios, suite


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.conformance", description=__doc__)
    parser.add_argument("--n", type=int, default=200, help="scenarios per operator (default 200)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--op", action="append", choices=scenarios.OPERATORS, help="operators (default: all)")
    parser.add_argument("--show", type=int, default=3, help="unexplained differences to print")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    report = suite.run(args.n, args.seed, tuple(args.op or scenarios.OPERATORS))
    print("\n".join(report.lines()))
    for f in report.failures[:args.show]:
        print(suite.describe_failure(f))
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
