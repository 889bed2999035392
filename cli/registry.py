"""Which module registers each top-level ``plog`` command, in the order ``plog --help``
lists them (a user's path through the tool: set up, write, read, inspect, repair, operate).

Plain data with no imports, so the console script (``cli/entry.py``) can import only the
module of the command being run: a one-command run does not pay for building the other
eighteen. ``tests/cli/test_cli_basics.py`` checks this table against what the modules
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
    "schemas": "schemas",
    "simulate": "simulate",
    "assign": "assign",
    "brokers": "brokers",
    "completions": "completions",
}

#: What ``plog --help`` says of each command: one line each (at most SUMMARY_WIDTH characters,
#: the room Click's 80-column help leaves beside the longest name), where the first sentence
#: of a command's own help (its --help, its man page) says more. Click would cut those at
#: about 45 characters with "...".
SUMMARIES: dict[str, str] = {
    "init": "Create a data directory: a small Kafka cluster on this disk.",
    "topics": "Create, list, describe, alter and delete topics.",
    "produce": "Produce records from stdin or a file (lines or jsonl).",
    "consume": "Consume records from offsets, times or a group's position.",
    "groups": "List, describe, reset and delete consumer groups.",
    "ls": "List the topics, partitions and segments of log directories.",
    "dump": "Print log, index and checkpoint files as kafka-dump-log.sh.",
    "lookup": "Find the segment, index entry and batch of an offset or time.",
    "verify": "Check Kafka log files without modifying them.",
    "recover": "Recover log directories after a crash, as a broker's start-up.",
    "retention": "Delete old segments as Kafka's retention does (time, size).",
    "compact": "Compact logs with Kafka's log cleaner.",
    "maintain": "Run retention and compaction once for a data directory.",
    "scan": "Scan whole log directories: stats, search, verify, Spark SQL.",
    "schemas": "List, show and export Schema Registry schemas from _schemas.",
    "simulate": "Run a replication scenario and print its timeline.",
    "assign": "Move partition replicas between brokers; report placement.",
    "brokers": "List, stop and start the brokers of a data directory.",
    "completions": "Shell completions for bash, zsh and fish.",
}
SUMMARY_WIDTH = 63

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
