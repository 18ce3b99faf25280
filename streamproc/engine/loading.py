"""Loading a topology from a user's module: the one rule ``streamproc run``, ``describe`` and
``reprocess`` (and Spark's Python workers) share.

``MODULE[:ATTR]`` names a module exposing ``build() -> Topology`` or a ``topology`` attribute; with
``:ATTR`` that attribute is used (a Topology, or a callable returning one). A ``StreamsBuilder``
given instead of a Topology is built. With ``search_cwd`` the current directory is searched first,
as ``python -m`` and pytest do, so ``streamproc run mytopo`` works in the folder of ``mytopo.py``.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from ..dsl.topology import Topology
from ..errors import StreamprocError, user_frame

__all__ = ["TopologyLoadError", "load_topology"]


class TopologyLoadError(StreamprocError, ValueError):
    """``MODULE[:ATTR]`` does not give a topology; the message says why and what to do."""


def load_topology(spec: str, extra_path: Iterable[str] = (), search_cwd: bool = False) -> Topology:
    """The :class:`Topology` that ``spec`` (``MODULE[:ATTR]``) names; ``extra_path`` entries are
    appended to ``sys.path`` first. Raises :class:`TopologyLoadError`, also when the user's module
    raises while it is imported or builds its topology (the message names the user's file and line;
    the original exception is its ``__cause__``)."""
    module_name, _, attr = spec.partition(":")
    if not module_name:
        raise TopologyLoadError(f"{spec!r} is not MODULE[:ATTR]")
    if module_name.endswith(".py"):
        path = Path(module_name)
        if path.parent != Path("."):
            raise TopologyLoadError(f"{spec!r} is a file path; give a module name: run from its folder "
                                    f"(cd {path.parent.resolve()}) with {path.stem!r}, or add that folder to "
                                    f"PYTHONPATH")
        raise TopologyLoadError(f"{spec!r} is a file name; give the module name: {path.stem!r}")
    for entry in extra_path:
        if entry not in sys.path:
            sys.path.append(entry)
    cwd = os.getcwd()
    if search_cwd and cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            where = f"in the current directory ({cwd}) or on PYTHONPATH" if search_cwd else "on PYTHONPATH"
            raise TopologyLoadError(f"cannot import topology module {module_name!r}: no module {exc.name!r} "
                                    f"{where}; run from the folder that holds it or add that folder to "
                                    f"PYTHONPATH") from None
        raise TopologyLoadError(f"topology module {module_name!r} failed to import{_at(exc)}: "
                                f"{type(exc).__name__}: {exc}") from exc
    except SyntaxError as exc:
        raise TopologyLoadError(f"topology module {module_name!r} has a syntax error at {exc.filename}:{exc.lineno}: "
                                f"{exc.msg}") from None
    except Exception as exc:
        raise TopologyLoadError(f"topology module {module_name!r} raised while it was imported{_at(exc)}: "
                                f"{type(exc).__name__}: {exc}") from exc
    if attr:
        if not hasattr(module, attr):
            raise TopologyLoadError(f"module {module_name!r} has no attribute {attr!r}")
        obj = getattr(module, attr)
    elif hasattr(module, "build"):
        obj = module.build
    elif hasattr(module, "topology"):
        obj = module.topology
    else:
        raise TopologyLoadError(f"module {module_name!r} has neither build() nor a `topology` attribute")
    try:
        if callable(obj) and not isinstance(obj, Topology):
            obj = obj()
        if hasattr(obj, "build") and not isinstance(obj, Topology):  # a StreamsBuilder
            obj = obj.build()
    except Exception as exc:
        raise TopologyLoadError(f"building the topology of {spec!r} failed{_at(exc)}: {type(exc).__name__}: "
                                f"{exc}") from exc
    if not isinstance(obj, Topology):
        raise TopologyLoadError(f"{spec!r} gave {type(obj).__name__} {obj!r}, not a Topology")
    return obj


def _at(exc: BaseException) -> str:
    """`` at file:line`` of :func:`~streamproc.errors.user_frame` (empty when there is none)."""
    frame = user_frame(exc)
    return f" at {frame[1]}:{frame[2]}" if frame is not None else ""
