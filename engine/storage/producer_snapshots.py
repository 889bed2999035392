"""Producer-state snapshot files (``<20-digit offset>.snapshot``): naming, listing,
reading and writing them, and Kafka's rules for which ones a load deletes. The bytes are
:mod:`plog.formats.producer_snapshot`'s; the state they hold is
:class:`~plog.engine.storage.producer_state.ProducerStateManager`'s.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterable

from plog.formats.producer_snapshot import decode_snapshot

from plog.engine.storage.checkpoints import fsync_dir
from plog.engine.storage.file_names import (
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    TMP_FILE_SUFFIX,
    file_name,
    file_offset,
)
from plog.engine.storage.producer_state_entry import ProducerStateEntry


def snapshot_file_name(offset: int) -> str:
    """``<20-digit zero-padded offset>.snapshot`` (``LogFileUtils.producerSnapshotFile``)."""
    return file_name(offset, PRODUCER_SNAPSHOT_FILE_SUFFIX)


def list_snapshot_files(log_dir: str | os.PathLike) -> dict[int, Path]:
    """Regular ``*.snapshot`` files of ``log_dir`` by offset (``listSnapshotFiles``)."""
    found: dict[int, Path] = {}
    d = Path(log_dir)
    if not d.is_dir():
        return found
    for p in d.iterdir():
        if p.name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX) and p.is_file():
            # Kafka parses the text before the first dot; a name that does not parse would
            # make it throw, so such a file is simply not a snapshot to us.
            offset = file_offset(p.name)
            if offset is not None:
                found[offset] = p
    return dict(sorted(found.items()))


def stray_snapshots(snapshot_offsets: Iterable[int], segment_base_offsets: Iterable[int]) -> dict[int, int | None]:
    """The snapshots ``removeStraySnapshots`` deletes (a broker's every load does), each
    with the later stray snapshot that supersedes it: a snapshot with no segment starting at
    its offset is stray; every stray but the largest goes, and the largest too when it lies
    below the last segment's base offset (superseded by None: the segments). The largest
    stray above every base is the clean-shutdown snapshot at the log end offset: it stays."""
    bases = set(segment_base_offsets)
    out: dict[int, int | None] = {}
    latest_stray = None
    for offset in sorted(snapshot_offsets):
        if offset not in bases:
            if latest_stray is not None:
                out[latest_stray] = offset
            latest_stray = offset
    if latest_stray is not None and bases and latest_stray < max(bases):
        out[latest_stray] = None
    return out


def snapshot_out_of_range(offset: int, log_start_offset: int, log_end_offset: int) -> bool:
    """``truncateAndReload``'s bounds: a snapshot above the log end offset, or at or below
    the log start offset (note: exactly at the log start goes too), is deleted."""
    return offset > log_end_offset or offset <= log_start_offset


def read_snapshot(path: str | os.PathLike) -> list[ProducerStateEntry]:
    """The entries of a snapshot file (``readSnapshot``); CorruptSnapshotError if it does not decode.

    Decoding is Kafka's lenient one (bytes after the last entry are ignored if the CRC,
    which covers them, matches).
    """
    data = Path(path).read_bytes()
    return [ProducerStateEntry.from_snapshot_entry(e) for e in decode_snapshot(data, strict=False)]


def delete_snapshot_file(path: Path) -> None:
    """Delete a snapshot file; one already gone is fine."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def write_snapshot_file(path: Path, data: bytes, sync: bool) -> None:
    """Write a snapshot as a whole file: ``<name>.tmp``, fsynced when ``sync``, renamed over
    ``path``, then the directory fsynced (when ``sync``; a file system that refuses a
    directory fsync still renamed atomically).

    Kafka writes the file in place (CREATE+WRITE, then fsync when ``sync``) -- without
    truncating an existing longer file, which would then fail its CRC. Through the ``.tmp``
    a crash leaves the old file or the new one, never a torn one; a failure (a full disk,
    Ctrl-C) leaves no ``.tmp`` behind, and its error names ``path``.
    """
    tmp = path.with_name(path.name + TMP_FILE_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as e:
        # Log loading does not look for a .tmp: remove it.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.filename in (None, str(tmp)):
            # Name the snapshot the user would look for, not the temporary just removed.
            raise OSError(e.errno, e.strerror, str(path)) from None
        raise
    if sync:
        with contextlib.suppress(OSError):
            fsync_dir(path.parent)
