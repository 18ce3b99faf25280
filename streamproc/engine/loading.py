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

from ..dsl.topology import Topology
from ..errors import StreamprocError

__all__ = ["TopologyLoadError", "load_topology"]


class TopologyLoadError(StreamprocError, ValueError):
    """``MODULE[:ATTR]`` does not give a topology; the message says why and what to do."""


def load_topology(spec: str, extra_path: Iterable[str] = (), search_cwd: bool = False) -> Topology:
    """The :class:`Topology` that ``spec`` (``MODULE[:ATTR]``) names; ``extra_path`` entries are
    appended to ``sys.path`` first. Raises :class:`TopologyLoadError`; an exception raised by the
    user's module itself while it is imported or built propagates unchanged."""
    module_name, _, attr = spec.partition(":")
    if not module_name:
        raise TopologyLoadError(f"{spec!r} is not MODULE[:ATTR]")
    if module_name.endswith(".py"):
        raise TopologyLoadError(f"{spec!r} is a file name; give the module name: "
                                f"{module_name[:-3].replace('/', '.')!r}")
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
        raise
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
    if callable(obj) and not isinstance(obj, Topology):
        obj = obj()
    if hasattr(obj, "build") and not isinstance(obj, Topology):  # a StreamsBuilder
        obj = obj.build()
    if not isinstance(obj, Topology):
        raise TopologyLoadError(f"{spec!r} gave {type(obj).__name__} {obj!r}, not a Topology")
    return obj
