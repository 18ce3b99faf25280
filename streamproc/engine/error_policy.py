"""What happens to a record that cannot be deserialized or processed.

* ``fail``: the daemon stops with a fatal error naming the record's position (its offset is not
  committed, so a restart meets it again).
* ``skip``: the record is logged (the first time per cause and topic-partition, then counted)
  and counted in ``streamproc_dropped_records_total{operator=...,reason=...}`` (operator: the
  one whose function raised, else the input topic); its offset is committed.
* ``dead-letter``: the record's original key and value bytes are sent to the dead-letter topic
  (``<application_id>-dlq``) with its original headers plus the error headers below; its offset
  is committed only once that send is acknowledged, like any other output.

Error headers (values UTF-8):

=============================  ==========================================
``streamproc.error.stage``     ``deserialization`` or ``processing``
``streamproc.error.class``     exception class, e.g. ``SerializationError``
``streamproc.error.message``   ``str(exception)`` (truncated to 4 KiB)
``streamproc.error.topic``     source topic
``streamproc.error.partition`` source partition
``streamproc.error.offset``    source offset
=============================  ==========================================
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any

from ..errors import SerializationError, StreamprocError

__all__ = ["ERROR_HEADER_PREFIX", "ErrorPolicy", "RecordError", "Stage", "classify", "dead_letter_headers"]

ERROR_HEADER_PREFIX = "streamproc.error."
_MAX_MESSAGE = 4096


class RecordError(StreamprocError):
    """A record failed under the ``fail`` error policy; names its position and the cause."""


class ErrorPolicy(str, Enum):
    FAIL = "fail"
    SKIP = "skip"
    DEAD_LETTER = "dead-letter"


class Stage(str, Enum):
    DESERIALIZATION = "deserialization"
    PROCESSING = "processing"


def classify(exc: BaseException) -> Stage:
    """Deserialization if ``exc`` is (or was caused by) a :class:`SerializationError`."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, SerializationError):
            return Stage.DESERIALIZATION
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return Stage.PROCESSING


def dead_letter_headers(original: Sequence[tuple[str, bytes]] | None, exc: BaseException, stage: Stage,
                        topic: str, partition: int, offset: int) -> list[tuple[str, bytes]]:
    """The original headers followed by the ``streamproc.error.*`` headers."""
    message = str(exc)
    if len(message) > _MAX_MESSAGE:
        message = message[:_MAX_MESSAGE] + "..."
    headers: list[tuple[str, Any]] = [h for h in (original or ()) if not h[0].startswith(ERROR_HEADER_PREFIX)]
    headers += [
        (ERROR_HEADER_PREFIX + "stage", stage.value.encode()),
        (ERROR_HEADER_PREFIX + "class", type(exc).__name__.encode()),
        (ERROR_HEADER_PREFIX + "message", message.encode("utf-8", "replace")),
        (ERROR_HEADER_PREFIX + "topic", topic.encode()),
        (ERROR_HEADER_PREFIX + "partition", str(partition).encode()),
        (ERROR_HEADER_PREFIX + "offset", str(offset).encode()),
    ]
    return headers
