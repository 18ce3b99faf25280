"""topologies/wordcount.py on the real broker (4 partitions): the daemon's final count per word
equals the TopologyTestDriver's, and a restart with the same application id restores the counts
from the changelog (the second run's counts continue from the first's).

The final count of a word does not depend on how the daemon interleaves partitions, so the
expectation is one driver fed every sentence; the daemon's final count of a word is the last
record of that word on the output topic (one output partition per word, read in order)."""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

import pytest

from tests.integration.test_pageviews_topology import _wait_committed
from tests.support.daemon import decode, read_topic, running_app
from tests.support.kafka import Out, produce, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

PARTITIONS = 4
SENTENCES = 100_000
VOCABULARY = [f"w{i}" for i in range(300)] + ["The", "cat", "HAT", "don't"]


def sentences(base: int, n: int, seed: int) -> list[tuple[str | None, str, int]]:
    """``(key or None, sentence, timestamp)``: 1-8 words, mixed case, some punctuation."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = [rng.choice(VOCABULARY) for _ in range(rng.randint(1, 8))]
        words = [w.upper() if rng.random() < 0.1 else w for w in words]
        key = None if rng.random() < 0.2 else f"doc-{rng.randint(0, 999)}"
        out.append((key, " ".join(words) + rng.choice(("", ".", "!")), base + i * 10))
    return out


def expected_counts(build: Any, records: list[tuple[str | None, str, int]], output: str,
                    input: str) -> dict[str, int]:
    from streamproc.testing import TopologyTestDriver

    with TopologyTestDriver(build()) as d:
        for key, value, ts in records:
            d.input_topic(input).pipe(key, value, ts)
        return {r.key: r.value for r in d.output_topic(output).read_records()}


def last_per_word(records: list[Any]) -> tuple[dict[str, int], Counter]:
    """The last count read per word, and how many records each word had."""
    last: dict[str, int] = {}
    seen: Counter = Counter()
    for key, value, _ in map(decode, records):
        last[key] = value
        seen[key] += 1
    return last, seen


async def test_wordcount_daemon_equals_driver_and_restores_counts(kafka_bootstrap: str, topic_factory: Any) -> None:
    from topologies import wordcount

    input_topic = await topic_factory(PARTITIONS, prefix="sentences")
    output_topic = unique_name("word-counts")

    def build() -> Any:
        return wordcount.build(input=input_topic, output=output_topic)

    base = int(time.time() * 1000) - 3_600_000
    first = sentences(base, SENTENCES // 2, seed=1)
    second = sentences(base + SENTENCES * 10, SENTENCES - SENTENCES // 2, seed=2)
    want_first = expected_counts(build, first, output_topic, input_topic)
    want_all = expected_counts(build, first + second, output_topic, input_topic)
    n_first = sum(want_first.values())
    n_all = sum(want_all.values())
    assert want_first != want_all and set(want_first) <= set(want_all)

    def out(records: list[tuple[str | None, str, int]]) -> list[Out]:
        return [Out(None if k is None else k.encode(), v.encode(), ts) for k, v, ts in records]

    app_id = unique_name("wordcount")
    await produce(kafka_bootstrap, input_topic, out(first))
    async with running_app(build(), kafka_bootstrap, app_id, wait_tasks=2 * PARTITIONS):
        await _wait_committed(kafka_bootstrap, app_id, [input_topic])
        got_first = await read_topic(kafka_bootstrap, output_topic, n_first, timeout=60, idle=1)
    last, seen = last_per_word(got_first)
    assert last == want_first
    assert seen == Counter(want_first), "one output record per word occurrence"

    # Restart: the counts continue from the changelog, not from zero.
    async with running_app(build(), kafka_bootstrap, app_id, wait_tasks=2 * PARTITIONS) as app:
        await produce(kafka_bootstrap, input_topic, out(second))
        got_all = await read_topic(kafka_bootstrap, output_topic, n_all, timeout=90, idle=1)
        restored = app.metrics.value("streamproc_restored_records_total",
                                     topic=f"{app_id}-{wordcount.STORE}-changelog")
    last, seen = last_per_word(got_all)
    assert last == want_all
    assert seen == Counter(want_all)
    assert restored > 0
    # each word's counts on the output topic are 1, 2, ..., n across both runs: the second run went on
    # from the restored count (no word started over at 1)
    per_word: dict[str, list[int]] = {}
    for key, value, _ in map(decode, got_all):
        per_word.setdefault(key, []).append(value)
    assert all(values == list(range(1, len(values) + 1)) for values in per_word.values())
