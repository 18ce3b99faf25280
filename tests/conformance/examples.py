"""The one-line examples of docs/semantics.md's table of deliberate differences, as scenarios with
the outputs each engine gives (``test_documented_examples.py`` runs them through both engines, so
the table cannot go stale). Outputs are ``[key, value, timestamp]`` in the runner's format, all
outputs of the scenario in order."""

from __future__ import annotations

from typing import Any

__all__ = ["EXAMPLES"]

EXAMPLES: dict[str, dict[str, Any]] = {
    "strict_session_expiry": {
        "scenario": {"op": "session", "agg": "count", "emit": "update", "gap": 14, "grace": 0,
                     "inputs": [["in", "k", "x", 0], ["in", "k", "x", 14], ["in", "k", "x", 28],
                                ["in", "k", "x", 35], ["in", "j", "x", 49], ["in", "k", "x", 32]]},
        "last_step": True,
        "ours": [["k@0@35", None, 35], ["k@0@35", "5", 35]],
        "kafka": [],
    },
    "close_emit_timestamp_is_window_end_minus_1": {
        "scenario": {"op": "time_window", "agg": "count", "emit": "close", "size": 10, "advance": 10, "grace": 0,
                     "inputs": [["in", "k", "x", 3], ["in", "k", "x", 8], ["in", "k", "x", 10]]},
        "ours": [["k@0@10", "2", 9]],
        "kafka": [["k@0@10", "2", 8]],
    },
    "close_emits_every_window": {
        "scenario": {"op": "time_window", "agg": "count", "emit": "close", "size": 6, "advance": 6, "grace": 12,
                     "inputs": [["in", "k", "x", 6], ["in", "k", "x", 18], ["in", "k", "x", 44]]},
        "ours": [["k@6@12", "1", 11], ["k@18@24", "1", 23]],
        "kafka": [],
    },
    "versioned_tombstone_always_recorded": {
        "scenario": {"op": "stream_table", "kind": "left_join", "history": 100, "grace": 0,
                     "inputs": [["table", "k", "A", 10], ["table", "k", None, 10], ["table", "k", "B", 5],
                                ["in", "k", "s", 20]]},
        "ours": [["k", "s+null", 20]],
        "kafka": [["k", "s+B", 20]],
    },
    "left_join_null_key_with_grace_joined_at_once": {
        "scenario": {"op": "stream_table", "kind": "left_join", "history": 100, "grace": 5,
                     "inputs": [["in", None, "v", 7]]},
        "ours": [[None, "v+null", 7]],
        "kafka": "error",          # Kafka Streams fails the task on the None key
    },
    "join_late_records_dropped": {
        "scenario": {"op": "stream_stream", "kind": "join", "before": 5, "after": 5, "grace": 0,
                     "inputs": [["right", "k", "R1", 12], ["right", "k", "R2", 20], ["left", "k", "L", 14]]},
        "ours": [],
        "kafka": [["k", "L+R1", 14]],
    },
    "join_pair_at_retention_boundary_joins": {
        "scenario": {"op": "stream_stream", "kind": "join", "before": 5, "after": 5, "grace": 0,
                     "inputs": [["right", "k", "r", 0], ["right", "j", "x", 10], ["left", "k", "l", 5]]},
        "ours": [["k", "l+r", 5]],
        "kafka": [],
    },
    "join_unmatched_emitted_once_when_final": {
        "scenario": {"op": "stream_stream", "kind": "left_join", "before": 10, "after": 10, "grace": 0,
                     "inputs": [["left", "k", "l", 100], ["left", "j", "x", 111], ["right", "k", "r", 105]]},
        "ours": [["k", "l+r", 105]],
        "kafka": [["k", "l+null", 100], ["k", "l+r", 105]],
    },
}
