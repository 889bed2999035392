"""Options shared by the data-directory commands (topics, produce, consume, groups, assign)."""

from __future__ import annotations

# No Typer import at module level: a plain run (cli/plain.py) uses the helpers below
# without it; each option factory imports it when a command module is being registered.

DEFAULT_DATA_DIR = "plog-data"  # engine.cluster.DEFAULT_DATA_DIR, without importing the engine

DATA_DIR_HELP = ("Data directory: a plog data directory, or (read-only) a Kafka log directory. "
                 "Default: ./plog-data, or $PLOG_DATA_DIR.")


def data_dir_option():
    import typer

    return typer.Option(DEFAULT_DATA_DIR, "--data-dir", "-d", envvar="PLOG_DATA_DIR", help=DATA_DIR_HELP,
                        show_default=False)


def open_data_dir(path: str, *, create: bool = False):
    """The data directory at ``path``; engine errors become one-line CLI errors upstream."""
    from plog.engine.cluster.data_dir import DataDir

    return DataDir.open(path, create=create)


QUIET_ENV = "PLOG_QUIET"
VERBOSE_ENV = "PLOG_VERBOSE"


def quiet_option(help: str = "No progress bar and no status lines on stderr (also plog --quiet, $PLOG_QUIET)."):
    # The same flag everywhere; `plog --quiet CMD` sets $PLOG_QUIET before CMD's options are parsed.
    import typer

    return typer.Option(False, "--quiet", "-q", envvar=QUIET_ENV, help=help, show_envvar=False)


def schemas_option(help: str = "Another data or log directory whose _schemas topic holds the schemas "
                                "(repeatable)."):
    """``--schemas PATH``: where Schema Registry payloads find their schemas besides the log's own
    ``_schemas`` (consume, dump, scan)."""
    import typer

    return typer.Option(None, "--schemas", metavar="PATH", help=help)


def schema_registry_option(*aliases: str):
    """``--schema-registry URL``: a registry asked for the ids not found on disk."""
    import typer

    return typer.Option(None, "--schema-registry", *aliases, metavar="URL",
                        help="A Schema Registry to ask for ids not found on disk (GET /schemas/ids/ID, cached).")


def is_quiet() -> bool:
    """``plog --quiet`` (or $PLOG_QUIET) for commands without a ``--quiet`` of their own."""
    import os

    return os.environ.get(QUIET_ENV, "") not in ("", "0", "false")


def is_verbose() -> bool:
    import os

    return os.environ.get(VERBOSE_ENV, "") not in ("", "0", "false")


# -- spellings users bring from kcat and Kafka's console tools ---------------------------------------


def unescape(text: str) -> bytes:
    """A separator given on the command line: ``\\t``, ``\\n``, ``\\0`` and ``\\\\`` unescaped,
    other characters as UTF-8 (any byte through ``\\xHH``)."""
    return text.encode("utf-8").decode("unicode_escape").encode("latin-1", "surrogateescape") \
        if "\\" in text else text.encode("utf-8")


TOPIC_OPTION_HELP = "The topic, as kcat and Kafka's console tools spell it (instead of the TOPIC argument)."


def topic_option():
    # The Python name ``name`` makes completions offer topics (command_tree.VALUE_KINDS).
    import typer

    return typer.Option(None, "--topic", "-t", help=TOPIC_OPTION_HELP, show_default=False)


def pick_topic(argument: str | None, option: str | None) -> str:
    """The topic of a command that takes it as ``TOPIC`` or ``-t/--topic`` (kcat, console tools)."""
    from .errors import CliUsageError

    if argument is not None and option is not None and argument != option:
        raise CliUsageError(f"two topics given: {argument} (argument) and {option} (--topic); give one")
    topic = argument if argument is not None else option
    if topic is None:
        raise CliUsageError("missing the topic: give it as the TOPIC argument or with -t/--topic")
    return topic


def property_option(tool: str, names):
    import typer

    return typer.Option(None, "--property", metavar="NAME=VALUE",
                        help=f"A {tool} property (repeatable): {', '.join(names)}.")


def parse_properties(values: list[str] | None) -> dict[str, bytes]:
    """``--property NAME=VALUE`` (repeatable) as ``name -> value bytes`` (escapes as in
    :func:`unescape`); the last of a repeated name wins, as in Kafka's tools."""
    from .errors import CliUsageError

    out: dict[str, bytes] = {}
    for item in values or ():
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            raise CliUsageError(f"--property {item!r}: expected NAME=VALUE, e.g. print.key=true")
        out[name.strip()] = unescape(value)
    return out


_USE_DATA_DIR = ("plog works on files, not on a broker: use --data-dir DIR (a plog data directory or a Kafka log "
                 "directory; default ./plog-data or $PLOG_DATA_DIR)")

#: Options of kcat and Kafka's console tools that plog has no use for, with what to use instead;
#: cli/app.py prints the hint when a command does not have the option.
FOREIGN_OPTION_HINTS = {
    "--bootstrap-server": _USE_DATA_DIR,  # Kafka's tools
    "--broker-list": _USE_DATA_DIR,  # older console producer
    "-b": _USE_DATA_DIR,  # kcat
}


def foreign_option_hint(option: str | None) -> str | None:
    """The hint for an option plog does not have but kcat or a Kafka console tool does
    (``--bootstrap-server``, ``-b``), or None."""
    return FOREIGN_OPTION_HINTS.get(option or "")
