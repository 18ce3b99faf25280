"""Charts are optional: matplotlib is not part of the README's set-up (``pip install -e '.[test]'``).

:func:`pyplot` is the one way a benchmark gets matplotlib: it returns ``matplotlib.pyplot`` on the
non-interactive Agg backend, or ``None`` after printing one line that says the chart was skipped
and how to get it. A benchmark then writes its tables and JSON as usual, without the PNG.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SKIP_MESSAGE", "pyplot"]

SKIP_MESSAGE = "chart skipped: matplotlib is not installed (.venv/bin/pip install matplotlib draws {what})"


def pyplot(what: str) -> Any | None:
    """``matplotlib.pyplot`` (Agg backend), or None after printing :data:`SKIP_MESSAGE` for ``what``
    (the chart's file name) when matplotlib cannot be imported."""
    try:
        import matplotlib
    except ImportError:
        print(SKIP_MESSAGE.format(what=what), flush=True)
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
