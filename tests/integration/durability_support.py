"""Compatibility alias of :mod:`tests.support.durability` for branches begun before the move.

New code imports :mod:`tests.support.durability`; delete this module once no branch imports it.
"""

from __future__ import annotations

from tests.support.durability import (
    harness,
    read_all,
    recent_click_stream,
    restored_task,
    store_contents,
    topic_configs,
)

__all__ = ["harness", "read_all", "recent_click_stream", "restored_task", "store_contents", "topic_configs"]
