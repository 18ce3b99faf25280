"""topologies/pageviews.py on the real broker: the daemon's outputs equal the TopologyTestDriver's,
across a restart that restores the window stores (join buffers, unmatched views, window counts and
their emit progress) from their changelog topics.

How the expectation is made independent of how the daemon interleaves partitions: the grace periods
are longer than the data's time span, so while the data flows no window closes and no record is
late; the join pairs and the window counts are then a function of the data only. The windows are
closed afterwards, by one far-future "closing" view per input partition and per repartition
partition, produced only once the daemon has committed all the data, and after the daemon was
stopped and restarted (so what closes them is the restored state). Each output is compared as a
multiset with the driver's output for the same records.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from typing import Any

import pytest

from streamproc.engine.partitioning import partition_for
from tests.support.daemon import committed_offsets, decode, read_topic, running_app
from tests.support.kafka import Out, end_offsets, produce, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]

PARTITIONS = 4
MIN = 60_000
USERS = [f"user-{i:03d}" for i in range(150)]
PAGES = [f"/page/{i}" for i in range(12)]
ADS = ["shoes", "boots", "hats"]
GRACE = 3 * 60 * MIN          # longer than the data's span (about 40 minutes)


def traffic(base: int, n_views: int = 1500, n_clicks: int = 500, seed: int = 3) -> tuple[list, list]:
    """Views ~1.6 s apart and clicks ~5 s apart in event time, jittered by up to a minute."""
    rng = random.Random(seed)
    views = [(rng.choice(USERS), {"page": rng.choice(PAGES), "i": i}, base + i * 1_600 + rng.randint(-MIN, MIN))
             for i in range(n_views)]
    clicks = [(rng.choice(USERS), {"ad": rng.choice(ADS), "i": i}, base + i * 5_000 + rng.randint(-MIN, MIN))
              for i in range(n_clicks)]
    return views, clicks


def closing_views(ts: int) -> list[tuple[str, dict[str, Any], int]]:
    """One view per input partition (by user) and per repartition partition (by page) at ``ts``."""
    users = {partition_for(f"closer-{i}".encode(), PARTITIONS): f"closer-{i}" for i in range(200)}
    pages = {partition_for(f"/closer/{i}".encode(), PARTITIONS): f"/closer/{i}" for i in range(200)}
    assert len(users) == len(pages) == PARTITIONS
    return [(users[p], {"page": pages[p], "i": -1}, ts) for p in range(PARTITIONS)]


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


async def _wait_committed(bootstrap: str, app_id: str, topics: list[str]) -> None:
    for topic in topics:
        ends = await end_offsets(bootstrap, topic)
        deadline = time.monotonic() + 60
        while await committed_offsets(bootstrap, app_id, topic, PARTITIONS) != ends:
            if time.monotonic() > deadline:
                raise AssertionError(f"the daemon did not commit all of {topic!r} within 60 s")
            await asyncio.sleep(0.2)


async def test_pageviews_daemon_equals_driver_across_a_restore(kafka_bootstrap: str, topic_factory: Any) -> None:
    from streamproc.testing import TopologyTestDriver
    from topologies import pageviews

    views_topic = await topic_factory(PARTITIONS, prefix="page-views")
    clicks_topic = await topic_factory(PARTITIONS, prefix="ad-clicks")
    joined_topic, counts_topic = unique_name("views-with-clicks"), unique_name("page-view-counts")

    def build() -> Any:
        return pageviews.build(join_grace=GRACE, count_grace=GRACE, views=views_topic, clicks=clicks_topic,
                               joined=joined_topic, counts=counts_topic)

    # recent enough for the changelogs (retention = store retention + 24 h), closers not in the future
    base = (int(time.time() * 1000) - 12 * 60 * MIN) // MIN * MIN
    views, clicks = traffic(base)
    closers = closing_views(base + 10 * 60 * MIN)

    with TopologyTestDriver(build()) as d:
        for topic, records in ((views_topic, views), (clicks_topic, clicks), (views_topic, closers)):
            for key, value, ts in records:
                d.input_topic(topic).pipe(key, value, ts)
        want_joined = Counter((k, json.dumps(v, sort_keys=True), ts) for k, v, ts in
                              ((r.key, r.value, r.timestamp) for r in d.output_topic(joined_topic).read_records()))
        want_counts = Counter((k, json.dumps(v, sort_keys=True), ts) for k, v, ts in
                              ((r.key, r.value, r.timestamp) for r in d.output_topic(counts_topic).read_records()))
    n_unmatched = sum(c for (_, v, _), c in want_joined.items() if json.loads(v)["ad"] is None)
    assert 100 < n_unmatched < sum(want_joined.values()) - 100, "both matched and unmatched views"
    assert sum(json.loads(v)["views"] * c for (_, v, _), c in want_counts.items()) == len(views)

    app_id = unique_name("pageviews")
    await produce(kafka_bootstrap, views_topic, (Out(k.encode(), _json(v), ts) for k, v, ts in views))
    await produce(kafka_bootstrap, clicks_topic, (Out(k.encode(), _json(v), ts) for k, v, ts in clicks))
    async with running_app(build(), kafka_bootstrap, app_id, wait_tasks=2 * PARTITIONS):
        await _wait_committed(kafka_bootstrap, app_id, [views_topic, clicks_topic])
        early = await read_topic(kafka_bootstrap, joined_topic, 1, timeout=2)
    # Restart: the new instance restores every store from its changelog before processing.
    async with running_app(build(), kafka_bootstrap, app_id, wait_tasks=2 * PARTITIONS) as app:
        await produce(kafka_bootstrap, views_topic, (Out(k.encode(), _json(v), ts) for k, v, ts in closers))
        got_joined = await read_topic(kafka_bootstrap, joined_topic, sum(want_joined.values()), timeout=60, idle=1)
        got_counts = await read_topic(kafka_bootstrap, counts_topic, sum(want_counts.values()), timeout=60, idle=1)
        restored = {store: app.metrics.value("streamproc_restored_records_total",
                                             topic=f"{app_id}-{store}-changelog")
                    for store in ("views-with-clicks-this-join-store", "views-with-clicks-other-join-store",
                                  "views-with-clicks-outer-shared-join-store", "page-views-per-minute")}
    assert all(json.loads(r.value)["ad"] is not None for r in early), "no unmatched view before its window closed"
    got = Counter((k, json.dumps(v, sort_keys=True), ts) for k, v, ts in map(decode, got_joined))
    assert got - want_joined == Counter(), "unexpected joined records"
    assert want_joined - got == Counter(), "missing joined records"
    got = Counter((k, json.dumps(v, sort_keys=True), ts) for k, v, ts in map(decode, got_counts))
    assert got - want_counts == Counter(), "unexpected counts"
    assert want_counts - got == Counter(), "missing counts"
    assert all(n > 0 for n in restored.values()), restored
