"""The peers' venvs: one per peer, created from its fully pinned requirements file, outside git.

Location: ``$STREAMPROC_PEER_VENVS`` or ``~/.cache/streamproc/peer-venvs/<name>``. A venv is
(re)built when it is missing or when its requirements file changed since it was built (a stamp
file holds the file's digest). streamproc and the passthrough run in the project's own venv
(the interpreter running the harness).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = {"quix": HERE / "requirements-quix.txt", "faust": HERE / "requirements-faust.txt",
                "bytewax": HERE / "requirements-bytewax.txt", "tools": HERE / "requirements-tools.txt"}


def root() -> Path:
    return Path(os.environ.get("STREAMPROC_PEER_VENVS", Path.home() / ".cache" / "streamproc" / "peer-venvs"))


def python(name: str) -> Path:
    return root() / name / "bin" / "python"


def ensure(name: str, base_python: str | None = None) -> Path:
    """The venv's python, building the venv first if needed (prints what it does)."""
    req = REQUIREMENTS[name]
    digest = hashlib.sha256(req.read_bytes()).hexdigest()
    venv = root() / name
    stamp = venv / ".requirements-sha256"
    if stamp.exists() and stamp.read_text().strip() == digest and python(name).exists():
        return python(name)
    py = base_python or _python311()
    print(f"building the {name} venv in {venv} from {req.name} ({py})", flush=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([py, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run([str(python(name)), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "-r", str(req)], check=True)
    stamp.write_text(digest + "\n")
    return python(name)


def _python311() -> str:
    """Python 3.11 for the peers (the versions pinned were resolved on 3.11)."""
    for cand in ("python3.11",):
        try:
            subprocess.run([cand, "-c", "import sys; assert sys.version_info[:2] == (3, 11)"], check=True,
                           capture_output=True)
            return cand
        except (OSError, subprocess.CalledProcessError):
            pass
    if sys.version_info[:2] == (3, 11):
        return sys.executable
    raise RuntimeError("the peer venvs need Python 3.11 (python3.11 not found on PATH)")
