"""Run ``plog`` in the test process through its real entry point (``cli.main.main``), so
errors and exit codes go through the one error boundary, and fingerprint directories."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from plog.cli.main import main


def plog_exe() -> str:
    """Path of the ``plog`` console script of the running interpreter's environment (next to
    ``sys.executable``, whichever virtualenv runs the suite; never a fixed ``.venv``)."""
    exe = Path(sys.executable).parent / "plog"
    if not exe.is_file():
        raise FileNotFoundError(f"no plog console script at {exe}: pip install -e . in the venv")
    return str(exe)


def plog(capsys, *args):
    """``plog ARGS`` in this process: (exit code, stdout, stderr)."""
    try:
        main(list(args))
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def tree_digest(path) -> dict[str, str]:
    """Every file under ``path`` (relative name) -> sha256 of its bytes."""
    out = {}
    for root, _dirs, files in os.walk(path):
        for name in files:
            p = os.path.join(root, name)
            with open(p, "rb") as f:
                out[os.path.relpath(p, path)] = hashlib.sha256(f.read()).hexdigest()
    return out
