"""Options objects for DSL calls with several optional settings (Kafka Streams' ``Materialized``,
``Grouped``, ``Joined``...). Every DSL call also accepts the same settings as keyword arguments;
an explicit keyword wins over the options object.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..serde import Serde, by_name
from ..time import Duration

__all__ = ["Consumed", "Grouped", "Joined", "Materialized", "Named", "Produced", "check_callable", "check_name",
           "check_serde"]


def check_callable(fn: Any, arg: str, op: str) -> Callable[..., Any]:
    """``fn`` if callable, else a ``ValueError`` naming the argument ``arg`` of ``op()`` and the value."""
    if not callable(fn):
        raise ValueError(f"{arg} of {op}() must be callable, got {type(fn).__name__} {fn!r}")  # noqa: TRY004 - bad input is a ValueError
    return fn


def check_serde(value: Any, arg: str, owner: str) -> Serde | None:
    """Return ``value`` as a :class:`~streamproc.serde.Serde` (a Serde, a built-in name, or None).

    Anything else is a ``ValueError`` naming the argument, its owner and the value.
    """
    if value is None or isinstance(value, Serde):
        return value
    if isinstance(value, str):
        try:
            return by_name(value)
        except ValueError as exc:
            raise ValueError(f"{arg} of {owner}: {exc}") from None
    raise ValueError(
        f"{arg} of {owner} must be a streamproc.serde.Serde or a built-in serde name, "
        f"got {type(value).__name__} {value!r}"
    )


def check_name(name: Any, what: str) -> str | None:
    """Validate an operator or store name: None, or a non-empty str usable in a topic name."""
    if name is None:
        return None
    if not isinstance(name, str) or not name:
        raise ValueError(f"name of {what} must be a non-empty str, got {name!r}")
    bad = [c for c in name if not (c.isascii() and (c.isalnum() or c in "._-"))]
    if bad:
        raise ValueError(
            f"name {name!r} of {what} may only contain ASCII letters, digits, '.', '_' and '-' "
            f"(it becomes part of topic names); offending characters: {''.join(sorted(set(bad)))!r}"
        )
    return name


@dataclass(frozen=True)
class Named:
    """A name for an operator (its store, changelog and metrics are keyed by it)."""

    name: str | None = None

    @classmethod
    def as_(cls, name: str) -> Named:
        return cls(name)


@dataclass(frozen=True)
class Consumed:
    """How a source topic is read: key and value serdes."""

    key_serde: Any = None
    value_serde: Any = None
    name: str | None = None


@dataclass(frozen=True)
class Produced:
    """How a sink writes: key and value serdes."""

    key_serde: Any = None
    value_serde: Any = None
    name: str | None = None


@dataclass(frozen=True)
class Grouped:
    """Grouping settings: the name of the repartition topic (when one is needed) and its serdes."""

    name: str | None = None
    key_serde: Any = None
    value_serde: Any = None


@dataclass(frozen=True)
class Materialized:
    """How an aggregation or table is stored.

    - ``name``: store name (also names the changelog topic ``<application_id>-<name>-changelog``).
    - ``key_serde`` / ``value_serde``: serdes of the changelog (defaults: the serde known for the
      data, else the builder's default serde).
    - ``retention``: session- or window-store retention (default ``gap + grace`` for session windows,
      ``size + grace`` for time windows; smaller is a ``ValueError``).
    - ``logging``: False disables the changelog of this store.
    """

    name: str | None = None
    key_serde: Any = None
    value_serde: Any = None
    retention: Duration | None = None
    logging: bool = True

    @classmethod
    def as_(cls, name: str) -> Materialized:
        return cls(name=name)

    def with_key_serde(self, s: Any) -> Materialized:
        return replace(self, key_serde=s)

    @staticmethod
    def from_positional(name: Any, emit: Any, materialized: Materialized | None, op: str
                        ) -> tuple[Any, Any, Materialized | None]:
        """``(name, emit, materialized)`` with a ``Materialized`` given in the ``name`` or ``emit``
        position moved to ``materialized`` (Kafka Streams style: ``count(Materialized.as_("n"))``);
        the same options given twice are a ``ValueError``."""
        for slot in ("name", "emit"):
            value = name if slot == "name" else emit
            if isinstance(value, Materialized):
                if materialized is not None:
                    raise ValueError(f"{op}: a Materialized given both positionally ({value!r}) and as "
                                     f"materialized= ({materialized!r}); give it once")
                materialized = value
                if slot == "name":
                    name = None
                else:
                    emit = None
        return name, emit, materialized

    def with_value_serde(self, s: Any) -> Materialized:
        return replace(self, value_serde=s)

    def with_retention(self, retention: Duration) -> Materialized:
        return replace(self, retention=retention)

    def with_logging_disabled(self) -> Materialized:
        return replace(self, logging=False)


@dataclass(frozen=True)
class Joined:
    """Join settings: operator name (names the join's stores) and serdes.

    - stream-table join: ``grace`` (the grace buffer), ``key_serde``/``value_serde`` (buffer and
      repartition serdes);
    - stream-stream join: ``key_serde``, ``value_serde`` (this stream's values) and
      ``other_value_serde`` (the other stream's values) for the join stores and repartition topics;
      the grace comes from the ``JoinWindows``.
    """

    name: str | None = None
    grace: Duration | None = None
    key_serde: Any = None
    value_serde: Any = None
    other_value_serde: Any = None
