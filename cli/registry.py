"""Which module registers each top-level ``plog`` command, in the order ``plog --help``
lists them (a user's path through the tool: set up, write, read, inspect, repair, operate).

Plain data with no imports, so the console script (``cli/entry.py``) can import only the
module of the command being run: a one-command run does not pay for building the other
seventeen. ``tests/cli/test_cli_basics.py`` checks this table against what the modules
really register.
"""

from __future__ import annotations

COMMAND_MODULES: dict[str, str] = {
    "init": "topics",
    "topics": "topics",
    "produce": "produce",
    "consume": "consume",
    "groups": "groups",
    "ls": "ls",
    "dump": "dump",
    "lookup": "lookup",
    "verify": "verify",
    "recover": "recover",
    "retention": "maintain",
    "compact": "maintain",
    "maintain": "maintain",
    "scan": "scan",
    "simulate": "simulate",
    "assign": "assign",
    "brokers": "brokers",
    "completions": "completions",
}

# The root options, none of which takes a value: what may come before the command's name.
ROOT_FLAGS = frozenset({"--debug", "-q", "--quiet", "-v", "--verbose", "--no-color"})


def command_module(argv: list[str]) -> str | None:
    """The module to import for ``plog ARGV``, or None when the whole tree is needed
    (no command, ``--help``/``--version`` of the root, a name that is not a command: the
    error lists the commands there are)."""
    for arg in argv:
        if arg in ROOT_FLAGS or (arg.startswith("-") and not arg.startswith("--") and len(arg) > 2
                                 and set(arg[1:]) <= {"q", "v"}):
            continue  # `-qv` is -q -v
        return COMMAND_MODULES.get(arg)
    return None
