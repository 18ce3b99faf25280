"""The daemon's attribution of sends to input offsets, through the real AckTracker: no offset is
ever committable while a record below it has an un-acknowledged output or changelog send."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamproc.purgatory import AckTracker
from streamproc.runtime.acks import register_batch, register_changelog_flush


class FakeSend:
    """Stands in for an aiokafka send future: resolves synchronously when acked."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[[Any], None]] = []
        self.acked = False

    def add_done_callback(self, cb: Callable[[Any], None]) -> None:
        self._callbacks.append(cb)
        if self.acked:
            cb(self)

    def ack(self) -> None:
        self.acked = True
        for cb in self._callbacks:
            cb(self)

    def done(self) -> bool:
        return self.acked

    def cancelled(self) -> bool:
        return False

    def exception(self) -> None:
        return None


PARTS = ("a", "b")

step = st.one_of(
    # a getmany batch: per partition a number of records, offset gaps, outputs per record, and how
    # the outputs are packed into producer batches (shared between partitions)
    st.tuples(st.just("batch"),
              st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3), st.integers(0, 2)), min_size=2, max_size=2),
              st.integers(1, 3)),
    # a commit: flush the changelogs (0-2 sends), then read the committable offsets
    st.tuples(st.just("commit"), st.integers(0, 2)),
    st.tuples(st.just("ack"), st.integers(0, 10_000)),
    # the periodic commit: flush under the lock (and note how far processing got), then batches
    # and acks go on while the changelog sends are in flight, then read the offsets capped there
    st.tuples(st.just("flush"), st.integers(0, 2)),
    st.tuples(st.just("read"), st.integers(0, 0)),
)


@settings(max_examples=300)
@given(st.lists(step, max_size=40), st.randoms(use_true_random=False))
# records processed between an interval commit's flush and its read must stay uncommitted
@example([("batch", [(2, 0, 0), (1, 0, 0)], 1), ("flush", 0), ("batch", [(2, 0, 0), (1, 0, 0)], 1), ("read", 0)],
         random.Random(1))
def test_committable_offset_never_passes_an_unacknowledged_record(steps: list[Any], rnd: Any) -> None:
    tracker = AckTracker(delivery_timeout_ms=10**9)
    unflushed: dict[str, int] = {}
    next_offset = {p: 0 for p in PARTS}
    caused: dict[tuple[str, int], list[FakeSend]] = {}  # (partition, offset) -> sends it caused
    since_flush: dict[str, list[int]] = {p: [] for p in PARTS}
    processed: dict[str, list[int]] = {p: [] for p in PARTS}
    pending: list[FakeSend] = []
    last_committable: dict[str, int] = {}

    caps: dict[str, int] | None = None  # an interval commit between its flush and its read
    for s in steps:
        if s[0] in ("flush", "read"):
            if s[0] == "flush" and caps is None:
                caps = {p: c for p in PARTS if (c := tracker.begun_until(p)) is not None}
                futures = [FakeSend() for _ in range(s[1])]
                flush(tracker, futures, since_flush, caused, unflushed)
                pending += futures
            elif s[0] == "read" and caps is not None:
                check(tracker, processed, caused, last_committable, caps, since_flush)
                caps = None
            continue
        if s[0] == "batch":
            _, per_part, n_batches = s
            firsts: dict[str, int] = {}
            lasts: dict[str, int] = {}
            packs: list[tuple[FakeSend, set[str]]] = [(FakeSend(), set()) for _ in range(n_batches)]
            for p, (n, gap, outs) in zip(PARTS, per_part):
                if n == 0:
                    continue
                offsets = []
                off = next_offset[p] + gap
                for _ in range(n):
                    offsets.append(off)
                    off += 1 + rnd.randint(0, 1)  # gaps inside the batch too (compaction, markers)
                next_offset[p] = off
                firsts[p], lasts[p] = offsets[0], offsets[-1]
                for o in offsets:
                    caused[(p, o)] = []
                    for _ in range(outs):
                        fut, sources = rnd.choice(packs)
                        sources.add(p)
                        caused[(p, o)].append(fut)
                processed[p] += offsets
                since_flush[p] += offsets
            sent = [(f, srcs) for f, srcs in packs if srcs]
            if not firsts:
                continue
            register_batch(tracker, firsts, lasts, sent, unflushed)
            pending += [f for f, _ in sent]
        elif s[0] == "ack":
            if pending:
                pending.pop(s[1] % len(pending)).ack()
            continue
        else:  # commit: the committer's order (flush, then read what is committable)
            futures = [FakeSend() for _ in range(s[1])]
            flush(tracker, futures, since_flush, caused, unflushed)
            pending += futures
            if rnd.random() < 0.5:  # sometimes the changelog acks arrive while the commit waits
                for f in futures:
                    f.ack()
                    pending.remove(f)
            check(tracker, processed, caused, last_committable)

    for f in list(pending):
        f.ack()
    flush(tracker, [], since_flush, caused, unflushed)
    check(tracker, processed, caused, last_committable)
    for p in PARTS:
        if processed[p]:
            assert tracker.committable_offset(p) == processed[p][-1] + 1
        assert tracker.pending_sends(p) == 0


def flush(tracker: AckTracker, futures: list[FakeSend], since_flush: dict[str, list[int]],
          caused: dict[tuple[str, int], list[FakeSend]], unflushed: dict[str, int]) -> None:
    """The changelog flush: the sends carry the state changes of every record since the last one."""
    for p in PARTS:
        for o in since_flush[p]:
            caused[(p, o)] += futures
        since_flush[p] = []
    register_changelog_flush(tracker, PARTS, futures, unflushed)


def check(tracker: AckTracker, processed: dict[str, list[int]], caused: dict[tuple[str, int], list[FakeSend]],
          last_committable: dict[str, int], caps: dict[str, int] | None = None,
          since_flush: dict[str, list[int]] | None = None) -> None:
    for p in PARTS:
        if caps is not None and p not in caps:
            continue  # nothing begun at the flush: the committer skips the partition
        c = tracker.committable_offset(p, None if caps is None else caps[p])
        if c is None:
            assert not processed[p]
            continue
        assert c >= last_committable.get(p, c), "the committable offset went backwards"
        last_committable[p] = c
        unflushed_records = set(since_flush[p]) if since_flush is not None else set()
        for o in processed[p]:
            if o < c:
                assert all(f.acked for f in caused[(p, o)]), f"offset {c} committable past {p}@{o}"
                assert o not in unflushed_records, f"offset {c} committable past {p}@{o}, whose state " \
                                                   f"changes are not flushed to the changelog yet"

