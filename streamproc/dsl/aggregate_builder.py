"""What every grouped-stream aggregation (non-windowed, time-windowed, session) builds the same way:
its input (through the repartition topic after a key change) and its store's serdes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..serde import Serde
from .options import Grouped, Materialized, check_serde

if TYPE_CHECKING:  # pragma: no cover
    from .kstream import KStream

__all__ = ["aggregation_input"]


def aggregation_input(stream: KStream, grouped: Grouped, node_name: str, op: str, store_kind: str,
                      key_serde: Any, value_serde: Any, mat: Materialized,
                      known_value_serde: Serde | None) -> tuple[KStream, Serde, Serde]:
    """``(input stream, store key serde, store value serde)`` of aggregation ``node_name``.

    After a key change (``group_by``, ``map``...) the input is the repartition topic
    ``<application_id>-<name>-repartition`` (``name``: the ``Grouped`` name, else the operator's);
    the serdes come from the arguments, then ``Materialized``, then what is known of the stream
    (``known_value_serde`` for the value: ``INT`` for counts, the stream's for ``reduce``).
    """
    b = stream._builder
    if stream._key_changed:
        stream = stream._repartitioned(grouped.name if grouped.name is not None else node_name, grouped.key_serde,
                                       grouped.value_serde)
    ks = b._serde(f"key of {store_kind} store {node_name!r}",
                  check_serde(key_serde, "key_serde", f"{op}()"), check_serde(mat.key_serde, "key_serde", op),
                  grouped.key_serde, stream.key_serde)
    vs = b._serde(f"value of {store_kind} store {node_name!r}",
                  check_serde(value_serde, "value_serde", f"{op}()"),
                  check_serde(mat.value_serde, "value_serde", op), known_value_serde)
    return stream, ks, vs
