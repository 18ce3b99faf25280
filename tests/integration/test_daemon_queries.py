"""Interactive queries against two running instances on a real broker (issue 23): every answer,
followed through its redirect when another instance owns the key, equals the TopologyTestDriver's
final store contents; metadata names the owner; an instance restoring a key's partition answers 503."""

from __future__ import annotations

import asyncio
import random
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest

from streamproc import TopologyTestDriver
from streamproc.engine.partitioning import partition_for
from tests.support.daemon import (
    committed_offsets,
    free_port,
    recent_base_ts,
    running_app,
    throttle_restore,
    wait_until,
)
from tests.support.kafka import Out, produce, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

PARTITIONS = 4


async def get(session: aiohttp.ClientSession, url: str) -> tuple[int, Any, str | None]:
    async with session.get(url, allow_redirects=False) as resp:
        body = await resp.json(content_type=None)
        return resp.status, body, resp.headers.get("Location")


async def wait_committed(bootstrap: str, group: str, topic: str, last: dict[int, int]) -> None:
    for _ in range(600):
        offs = await committed_offsets(bootstrap, group, topic, PARTITIONS)
        if all(offs[p] == o + 1 for p, o in last.items()):
            return
        await asyncio.sleep(0.2)
    raise AssertionError("input not committed in time")


async def test_queries_answer_what_the_driver_holds(kafka_bootstrap: str, topic_factory: Any) -> None:
    from topologies import sessions, wordcount

    clicks = await topic_factory(PARTITIONS, prefix="clicks")
    lines = await topic_factory(PARTITIONS, prefix="lines")
    group = unique_name("queries")
    rng = random.Random(4)
    users = [f"user {i}" for i in range(60)]  # a space: the URL key is quoted
    base = recent_base_ts(4_000 * 20_000)
    click_data = [(rng.choice(users), base + i * 20_000) for i in range(4_000)]
    words = ["kafka", "stream", "table", "join", "window", "über"]
    line_data = [(None, " ".join(rng.choice(words) for _ in range(5)), base + i) for i in range(500)]

    topology_s = sessions.build(input=clicks, output=unique_name("sessions-out"))
    topology_w = wordcount.build(input=lines, output=unique_name("counts-out"))
    last: dict[str, dict[int, int]] = {clicks: {}, lines: {}}
    meta = await produce(kafka_bootstrap, clicks, [Out(u.encode(), b'{"page": "/"}', ts) for u, ts in click_data])
    for m in meta:
        last[clicks][m.partition] = max(last[clicks].get(m.partition, -1), m.offset)
    meta = await produce(kafka_bootstrap, lines, [Out(None, v.encode(), ts) for _, v, ts in line_data])
    for m in meta:
        last[lines][m.partition] = max(last[lines].get(m.partition, -1), m.offset)

    # one driver per partition, as the daemon runs one task per partition: each has its own stream
    # time, which decides which old sessions are already expired
    drivers_s = {p: TopologyTestDriver(sessions.build(input=clicks, output="s-out")) for p in range(PARTITIONS)}
    for u, ts in click_data:
        drivers_s[partition_for(u.encode(), PARTITIONS)].input_topic(clicks).pipe(u, {"page": "/"}, ts)
    driver_w = TopologyTestDriver(wordcount.build(input=lines, output="w-out"))
    for _, v, ts in line_data:
        driver_w.input_topic(lines).pipe(None, v, ts)

    for topology, topic, app_group, store, keys in (
            (topology_s, clicks, f"{group}-s", sessions.STORE, users),
            (topology_w, lines, f"{group}-w", wordcount.STORE, words + ["absent-word"])):
        ports = [free_port(), free_port()]
        async with running_app(topology, kafka_bootstrap, app_group, query_port=ports[0],
                               consumer_config={"heartbeat_interval_ms": 500}) as a, \
                running_app(topology, kafka_bootstrap, app_group, query_port=ports[1],
                            consumer_config={"heartbeat_interval_ms": 500}) as b:
            n_tasks = sum(1 for _ in topology.subtopologies_for(app_group)) * PARTITIONS
            await wait_until(lambda n_tasks=n_tasks: len(a.tasks.running()) + len(b.tasks.running()) == n_tasks
                             and len(a.tasks.running()) > 0 and len(b.tasks.running()) > 0, 90,
                             "both instances running their tasks")
            await wait_committed(kafka_bootstrap, app_group, topic, last[topic])
            if store == wordcount.STORE:  # the count sub-topology reads a repartition topic: let it drain
                await asyncio.sleep(3)
            servers = {f"127.0.0.1:{p}" for p in ports}
            async with aiohttp.ClientSession() as http:
                status, listing, _ = await get(http, f"http://127.0.0.1:{ports[0]}/v1/stores")
                assert status == 200 and {"name": store, "kind": "session" if store == sessions.STORE
                                          else "key_value"} in listing
                redirected = 0
                for key in keys:
                    url = f"/v1/stores/{quote(store)}/keys/{quote(key, safe='')}"
                    status, body, location = await get(http, f"http://127.0.0.1:{ports[0]}{url}")
                    if status == 307:
                        redirected += 1
                        assert location is not None
                        assert location.split("/v1/")[0].removeprefix("http://") in servers - {f"127.0.0.1:{ports[0]}"}
                        assert location.endswith(url)
                        status, body, _ = await get(http, location)
                    if store == sessions.STORE:
                        want = [{"start": w.key.start, "end": w.key.end, "value": w.value}
                                for w in drivers_s[partition_for(key.encode(), PARTITIONS)]
                                .session_store(store).fetch(key)]
                        if not want:  # every session of the key expired (or none): no value
                            assert status == 404 and "error" in body, (key, status, body)
                            continue
                        assert status == 200, (key, status, body)
                        assert body["key"] == key
                        assert [{"start": w["start"], "end": w["end"], "value": w["value"]} for w in body["windows"]] == want
                    else:
                        expected = driver_w.key_value_store(store).get(key)
                        expected = getattr(expected, "value", expected)  # an aggregate keeps (value, timestamp)
                        if expected is None:
                            assert status == 404, (key, status, body)
                            assert "error" in body
                        else:
                            assert status == 200, (key, status, body)
                            assert body["key"] == key and body["value"] == expected
                    status, where, _ = await get(http, f"http://127.0.0.1:{ports[1]}/v1/metadata/{quote(store)}/"
                                                       f"{quote(key, safe='')}")
                    assert status == 200 and where["active"] in servers
                    assert where["partition"] == partition_for(key.encode(), PARTITIONS)
                assert redirected > 0, "no key was owned by the other instance"
    for d in drivers_s.values():
        d.close()
    driver_w.close()


async def test_503_while_the_partition_restores(kafka_bootstrap: str, topic_factory: Any,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from topologies import sessions

    clicks = await topic_factory(PARTITIONS, prefix="clicks")
    group = unique_name("queries-restore")
    base = recent_base_ts(20_000 * 1_000)
    users = [f"u{i}" for i in range(5_000)]
    data = [(users[i % len(users)], base + i * 1_000) for i in range(20_000)]
    last: dict[int, int] = {}
    for m in await produce(kafka_bootstrap, clicks, [Out(u.encode(), b'{"page": "/"}', ts) for u, ts in data]):
        last[m.partition] = max(last.get(m.partition, -1), m.offset)
    topology = sessions.build(input=clicks, output=unique_name("out"))
    async with running_app(topology, kafka_bootstrap, group):
        await wait_committed(kafka_bootstrap, group, clicks, last)

    throttle_restore(monkeypatch, lambda: 300e-6)  # replay slowly: the restore surely takes seconds
    port = free_port()
    key = data[-1][0]  # clicked last: its session is surely still kept
    url = f"http://127.0.0.1:{port}/v1/stores/{sessions.STORE}/keys/{key}"
    seen: list[int] = []
    async with running_app(topology, kafka_bootstrap, group, query_port=port) as a, aiohttp.ClientSession() as http:
        while len(a.tasks.running()) < PARTITIONS:
            try:
                status, body, _ = await get(http, url)
                seen.append(status)
                if status == 503:
                    assert "error" in body
            except aiohttp.ClientConnectionError:
                pass
            await asyncio.sleep(0.05)
        status, body, _ = await get(http, url)
    assert 503 in seen, seen
    assert status == 200 and body["windows"], body
