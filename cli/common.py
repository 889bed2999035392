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
