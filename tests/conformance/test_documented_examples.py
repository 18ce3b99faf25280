"""Each one-line example of docs/semantics.md's table of deliberate differences, run through Kafka
Streams and streamproc: both engines give the documented outputs, the named classifier explains
the difference, and every classifier and every row of the table has its example."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from . import kafka_streams, ours
from .classifiers import CLASSIFIERS, compare
from .examples import EXAMPLES
from .test_conformance import _require_java

SEMANTICS = Path(__file__).resolve().parents[2] / "docs" / "semantics.md"


def _flat(steps: list[Any], last_step: bool) -> list[Any]:
    return list(steps[-1]) if last_step else [o for step in steps for o in step]


def test_every_classifier_and_table_row_has_an_example() -> None:
    rows = set(re.findall(r"^\| `([a-z0-9_]+)` \|", SEMANTICS.read_text(), flags=re.MULTILINE))
    assert rows == {c.name for c in CLASSIFIERS} == set(EXAMPLES), (
        "docs/semantics.md's table, tests/conformance/classifiers.py and tests/conformance/examples.py must "
        f"name the same differences: table {sorted(rows)}, classifiers {sorted(c.name for c in CLASSIFIERS)}, "
        f"examples {sorted(EXAMPLES)}")


def test_documented_examples_hold_in_both_engines() -> None:
    _require_java()
    logging.disable(logging.WARNING)
    try:
        scenarios = [{"id": i, **e["scenario"]} for i, e in enumerate(EXAMPLES.values())]
        results = kafka_streams.run(scenarios)
        for (name, example), s, k in zip(EXAMPLES.items(), scenarios, results):
            mine = ours.run(s)
            last = example.get("last_step", False)
            assert _flat(mine, last) == example["ours"], f"{name}: streamproc gave {_flat(mine, last)}"
            if example["kafka"] == "error":
                assert k["error"] is not None, f"{name}: Kafka Streams did not fail: {k['steps']}"
                continue
            assert k["error"] is None, f"{name}: Kafka Streams failed: {k['error']}"
            assert _flat(k["steps"], last) == example["kafka"], f"{name}: Kafka Streams gave {_flat(k['steps'], last)}"
            verdict = compare(s, mine, k["steps"])
            assert verdict.status == "deliberate" and name in verdict.classifiers, (name, verdict)
    finally:
        logging.disable(logging.NOTSET)
