"""The whole ``plog`` command tree: :data:`app` with every command registered, and
:func:`main`, which runs it inside the CLI's error boundary (both from ``cli/app.py``).

Import this to run or inspect any command in-process (tests, the documentation
generators). The console script imports only the module of the command being run
(``cli/entry.py``); both end in the same :func:`main`.
"""

from __future__ import annotations

import importlib

from .app import app, main
from .registry import COMMAND_MODULES

# Each module registers its commands on `app` when imported.
for _module in dict.fromkeys(COMMAND_MODULES.values()):
    importlib.import_module(f"{__package__}.{_module}")

__all__ = ["app", "main"]
