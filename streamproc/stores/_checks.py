"""Argument checks shared by the stores.

Every failure names the store and the argument: ``window store 'clicks': key must not be None``.
The checks run before a store mutates anything, so a rejected call leaves the store unchanged.
Hot paths test the common case inline (``type(ts) is int``) and call these only to build the error.
"""

from __future__ import annotations

from typing import Any, NoReturn

from ..time import Duration, duration_ms


def check_name(name: object, kind: str) -> str:
    """Return ``name`` if it is a non-empty ``str``; ``None``/empty -> ValueError, other types -> TypeError."""
    if name is None or name == "":
        raise ValueError(f"the name of a {kind} store must be a non-empty string, got {name!r}")
    if not isinstance(name, str):
        raise TypeError(f"the name of a {kind} store must be a str, got {type(name).__name__} {name!r}")
    return name


def check_duration(value: Duration, arg: str, owner: str, *, allow_zero: bool = True) -> int:
    """``value`` (int ms or timedelta) as int ms; negative -> ValueError, wrong type -> TypeError."""
    return duration_ms(value, arg, owner, allow_zero=allow_zero)


def fail_key(owner: str, arg: str = "key") -> NoReturn:
    """Raise the error for a ``None`` key."""
    raise ValueError(f"{owner}: {arg} must not be None")


def fail_int(owner: str, arg: str, value: Any) -> NoReturn:
    """Raise the error for a timestamp argument that is not an ``int`` (bool is rejected too)."""
    raise TypeError(f"{owner}: {arg} must be int milliseconds, got {type(value).__name__} {value!r}")


def check_int(owner: str, arg: str, value: Any) -> int:
    """Return ``value`` if it is an ``int`` (not bool), else raise :func:`fail_int`."""
    if type(value) is int:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    fail_int(owner, arg, value)


def check_optional_int(owner: str, arg: str, value: Any) -> int | None:
    """Like :func:`check_int` but ``None`` (an open bound) passes through."""
    if value is None:
        return None
    return check_int(owner, arg, value)


def key_type_error(owner: str, key: Any, exc: BaseException) -> TypeError:
    """The error for a key that cannot be hashed or ordered against the store's other keys."""
    return TypeError(
        f"{owner}: key {key!r} of type {type(key).__name__} cannot be stored or looked up: keys must be "
        f"hashable and mutually comparable (str, bytes, int, tuples of those) ({exc})"
    )


def keys_not_comparable(owner: str, exc: BaseException) -> TypeError:
    """The error for a range read over keys that cannot be ordered against each other."""
    return TypeError(f"{owner}: the keys of the store (or the range bounds) are not mutually comparable; "
                     f"use keys of one type (str, bytes, int, tuples of those) ({exc})")
