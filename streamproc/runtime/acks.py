"""How the daemon's sends are attributed to input offsets in the :class:`~streamproc.purgatory.AckTracker`.

The tracker computes a partition's committable offset as the lowest input offset with an
un-acknowledged send (else ``last begun + 1``). The daemon feeds it per *batch*:

* :func:`register_batch`: a partition's ``getmany`` batch covered offsets ``first..last``; every
  producer batch carrying one of its outputs (or a dead letter) is attributed to ``first``, then
  ``last`` is begun. Until those sends are acknowledged the committable offset stays ``<= first``:
  no record of the batch is committed early, whatever the order the brokers acknowledge in.
* :func:`register_changelog_flush`: the changelog records drained at a commit carry the state
  changes of every input record processed since the previous flush; their sends are attributed to
  the first of those offsets (``unflushed``).

Both keep the commit rule of docs/semantics.md ("Commits and delayed acks"): no offset is
committable while a record at or below it has an output or changelog record not yet acknowledged.
:class:`InputProgress` bundles the tracker with the ``unflushed`` offsets both functions share.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, MutableMapping
from typing import Any

from ..purgatory import AckTracker

__all__ = ["InputProgress", "register_batch", "register_changelog_flush"]


def register_batch(tracker: AckTracker, firsts: Mapping[Hashable, int], lasts: Mapping[Hashable, int],
                   sent: Iterable[tuple[Any, Iterable[Hashable]]],
                   unflushed: MutableMapping[Hashable, int]) -> None:
    """Record one processed ``getmany`` batch.

    ``firsts``/``lasts``: input partition -> first/last offset processed; ``sent``: ``(future,
    sources)`` per producer batch, ``sources`` being the input partitions whose records it carries;
    ``unflushed``: input partition -> first offset since the last changelog flush (updated).
    """
    for tp, first in firsts.items():
        tracker.begin(tp, first)
        if tp not in unflushed:
            unflushed[tp] = first
    for fut, sources in sent:
        for tp in sources:
            tracker.add_send(tp, firsts[tp], fut)
    for tp, last in lasts.items():
        if last > firsts[tp]:
            tracker.begin(tp, last)


def register_changelog_flush(tracker: AckTracker, inputs: Iterable[Hashable], futures: list[Any],
                             unflushed: MutableMapping[Hashable, int]) -> None:
    """Attribute a task's changelog sends to the first offset each of its ``inputs`` processed
    since the previous flush (and forget those offsets: the next flush starts after them)."""
    for tp in inputs:
        first = unflushed.pop(tp, None)
        if first is None:
            continue
        for fut in futures:
            tracker.add_send(tp, first, fut)


class InputProgress:
    """The daemon's delayed-ack state: the :class:`AckTracker` (keyed by input partition) and, per
    input partition, the first offset processed since its task's last changelog flush."""

    def __init__(self, tracker: AckTracker) -> None:
        self.tracker = tracker
        self.unflushed: dict[Hashable, int] = {}

    def processed(self, firsts: Mapping[Hashable, int], lasts: Mapping[Hashable, int],
                  sent: Iterable[tuple[Any, Iterable[Hashable]]]) -> None:
        """One round of processing: :func:`register_batch`."""
        register_batch(self.tracker, firsts, lasts, sent, self.unflushed)

    def flushed(self, inputs: Iterable[Hashable], futures: list[Any]) -> None:
        """A task's changelog flush: :func:`register_changelog_flush`."""
        register_changelog_flush(self.tracker, inputs, futures, self.unflushed)

    def close_partition(self, tp: Hashable) -> None:
        """Forget ``tp`` (its task closed): pending sends no longer hold anything back."""
        self.tracker.close_partition(tp)
        self.unflushed.pop(tp, None)
