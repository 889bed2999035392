"""Options shared by the data-directory commands (topics, produce, consume, groups, assign)."""

from __future__ import annotations

import typer

DEFAULT_DATA_DIR = "plog-data"  # engine.cluster.DEFAULT_DATA_DIR, without importing the engine

DATA_DIR_HELP = ("Data directory: a plog data directory, or (read-only) a Kafka log directory. "
                 "Default: ./plog-data, or $PLOG_DATA_DIR.")


def data_dir_option():
    return typer.Option(DEFAULT_DATA_DIR, "--data-dir", "-d", envvar="PLOG_DATA_DIR", help=DATA_DIR_HELP,
                        show_default=False)


def open_data_dir(path: str, *, create: bool = False):
    """The data directory at ``path``; engine errors become one-line CLI errors upstream."""
    from plog.engine.cluster import DataDir

    return DataDir.open(path, create=create)


QUIET_ENV = "PLOG_QUIET"
VERBOSE_ENV = "PLOG_VERBOSE"


def quiet_option(help: str = "No progress bar and no status lines on stderr (also plog --quiet, $PLOG_QUIET)."):
    # The same flag everywhere; `plog --quiet CMD` sets $PLOG_QUIET before CMD's options are parsed.
    return typer.Option(False, "--quiet", "-q", envvar=QUIET_ENV, help=help, show_envvar=False)


def is_quiet() -> bool:
    """``plog --quiet`` (or $PLOG_QUIET) for commands without a ``--quiet`` of their own."""
    import os

    return os.environ.get(QUIET_ENV, "") not in ("", "0", "false")


def is_verbose() -> bool:
    import os

    return os.environ.get(VERBOSE_ENV, "") not in ("", "0", "false")
