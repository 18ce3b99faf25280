"""The real Mermaid parser, for checking the diagrams ``streamproc describe --format mermaid`` prints.

``python -m tests.support.mermaid install`` installs Mermaid and jsdom (pinned versions, with ``npm``)
into ``$STREAMPROC_CACHE/mermaid-<version>`` once; ``scripts/setup.sh`` runs it. :func:`parse` runs
``mermaid.parse`` on a diagram in Node (``tests/support/mermaid_parse.mjs``): what GitHub's Markdown
renders a ``mermaid`` block with.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["MERMAID_VERSION", "available", "install", "parse"]

MERMAID_VERSION = "11.17.2"
JSDOM_VERSION = "24.1.3"
PARSER = Path(__file__).with_name("mermaid_parse.mjs")


def _cache() -> Path:
    env = os.environ.get("STREAMPROC_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "streamproc"


def _home() -> Path:
    return _cache() / f"mermaid-{MERMAID_VERSION}"


def missing_tools() -> list[str]:
    """The programs the parser needs that are not on PATH."""
    return [tool for tool in ("node", "npm") if shutil.which(tool) is None]


def available() -> bool:
    """Whether the parser can run here (Node present, Mermaid installed)."""
    return not missing_tools() and (_home() / "node_modules" / "mermaid" / "package.json").exists()


def install() -> Path:
    """Install the pinned Mermaid and jsdom with npm (nothing when they are there); their directory."""
    home = _home()
    if available():
        return home
    missing = missing_tools()
    if missing:
        raise RuntimeError(f"cannot install Mermaid: {', '.join(missing)} not found (install Node.js 18 or later)")
    home.mkdir(parents=True, exist_ok=True)
    subprocess.run(["npm", "install", "--prefix", str(home), "--no-audit", "--no-fund", "--silent",
                    f"mermaid@{MERMAID_VERSION}", f"jsdom@{JSDOM_VERSION}"], check=True, timeout=600)
    return home


def parse(diagram: str) -> tuple[bool, str]:
    """``(True, "ok <type>")`` when Mermaid parses ``diagram``, else ``(False, "error <message>")``."""
    env = {**os.environ, "NODE_PATH": str(_home() / "node_modules")}
    out = subprocess.run(["node", str(PARSER)], input=diagram, capture_output=True, text=True, env=env,
                         timeout=120, check=False)
    text = (out.stdout.strip() or out.stderr.strip()).splitlines()
    message = text[-1] if text else f"node exited with {out.returncode}"
    return out.returncode == 0 and message.startswith("ok"), message


if __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        sys.exit("usage: python -m tests.support.mermaid install")
    try:
        print(f"mermaid {MERMAID_VERSION}: ready in {install()}")
    except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
        print(f"mermaid not installed: {exc}; tests/unit/test_describe_mermaid.py needs it", file=sys.stderr)
