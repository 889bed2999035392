"""Kafka's ``TransactionIndex``: a segment's ``.txnindex``, the aborted transactions whose
ABORT marker is in the segment (34-byte ``AbortedTxn`` entries, :mod:`plog.formats.indexes`).

The transaction index is small and rarely written (one entry per aborted transaction
whose marker lands in the segment), so it is read with ``pread`` in chunks instead of
being mapped, and the file is created only by the first ``append``.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator, NamedTuple

from plog.formats import indexes as ix
from plog.formats.indexes import AbortedTxn

from plog.engine.storage.abstract_index import rename_if_exists
from plog.engine.storage.descriptor_budget import ReopenableFile, open_fd
from plog.engine.errors import InvalidOffsetError


class TxnIndexSearchResult(NamedTuple):
    """``TxnIndexSearchResult``: the aborted transactions overlapping a fetch range, and
    whether the search is complete (no later segment can add one)."""

    aborted_transactions: list[AbortedTxn]
    is_complete: bool


class TransactionIndex:
    """Aborted transactions whose ABORT marker is in this segment (``TransactionIndex``).

    Entries are 34-byte ``AbortedTxn`` records appended in marker order. Invariants: the
    file exists only once an abort was written (it is created by the first ``append``, never
    preallocated); every entry's ``last_offset`` is >= ``start_offset`` (``sanity_check``);
    ``last_offset`` strictly increases across appends made through this object. As in
    Kafka, the last offset is not read back from an existing file: only appends and
    ``truncate_to`` set it. A trailing partial entry is ignored by every read.

    The descriptor is opened by the first append or truncation and kept until ``close``
    (a :class:`~plog.engine.storage.descriptor_budget.ReopenableFile`: the descriptor budget may close
    it while idle, and the next use reopens it); reads of a file this object has not opened
    use a short-lived descriptor. Not thread-safe.
    """

    _READ_ENTRIES = 4096  # entries per pread: 139 KiB, whatever the file size

    def __init__(self, path: str | os.PathLike, start_offset: int):
        self.path = Path(path)
        self.start_offset = start_offset
        self._fd: ReopenableFile | None = None
        self._last_offset: int | None = None

    def __repr__(self) -> str:
        return f"TransactionIndex({str(self.path)!r}, start_offset={self.start_offset})"

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def base_offset(self) -> int:
        """The segment base offset (Kafka calls it ``startOffset`` here)."""
        return self.start_offset

    @property
    def _name(self) -> str:
        return os.path.abspath(self.path)

    @property
    def exists(self) -> bool:
        return self.path.exists()

    @property
    def size_in_bytes(self) -> int:
        """The file length, 0 when there is no file."""
        if self._fd is not None:
            return os.fstat(self._fd.fd).st_size
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return 0

    def _channel(self) -> int:
        # O_APPEND: every write lands at the end, after a truncate_to as well.
        if self._fd is None:
            self._fd = ReopenableFile(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o666)
        return self._fd.fd

    def append(self, txn: AbortedTxn) -> None:
        """Append one entry; its ``last_offset`` must exceed the previous append's."""
        if self._last_offset is not None and self._last_offset >= txn.last_offset:
            raise InvalidOffsetError(
                "The last offset of appended transactions must increase sequentially, but "
                f"{txn.last_offset} is not greater than current last offset {self._last_offset} "
                f"of index {self._name}")
        data = memoryview(ix.encode_aborted_txn(txn.producer_id, txn.first_offset, txn.last_offset,
                                                txn.last_stable_offset, txn.version))
        while data:
            written = os.write(self._channel(), data)
            data = data[written:]
        self._last_offset = txn.last_offset

    def _chunks(self) -> Iterator[tuple[int, bytes]]:
        """(file position, bytes) of consecutive runs of whole entries."""
        owned = self._fd is None
        try:
            fd = open_fd(self.path, os.O_RDONLY) if owned else -1
        except FileNotFoundError:
            return
        try:
            # Our own descriptor is fetched for each read: the budget may close it between.
            end = os.fstat(fd if owned else self._fd.fd).st_size
            pos = 0
            step = self._READ_ENTRIES * ix.TXN_INDEX_ENTRY_SIZE
            while end - pos >= ix.TXN_INDEX_ENTRY_SIZE:
                want = min(step, (end - pos) // ix.TXN_INDEX_ENTRY_SIZE * ix.TXN_INDEX_ENTRY_SIZE)
                data = os.pread(fd if owned else self._fd.fd, want, pos)
                whole = len(data) // ix.TXN_INDEX_ENTRY_SIZE * ix.TXN_INDEX_ENTRY_SIZE
                if whole == 0:
                    return  # the file shrank under us
                yield pos, data[:whole]
                pos += whole
        finally:
            if owned:
                os.close(fd)

    def _iter(self) -> Iterator[tuple[int, AbortedTxn]]:
        name = self._name
        for pos, chunk in self._chunks():
            for i, txn in enumerate(ix.iter_txn_entries(chunk, name)):
                yield pos + i * ix.TXN_INDEX_ENTRY_SIZE, txn

    def all_aborted_txns(self) -> list[AbortedTxn]:
        """Every entry in file order (empty when there is no file)."""
        return [txn for _, txn in self._iter()]

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``.

        An entry is collected when ``last_offset >= fetch_offset`` and ``first_offset <
        upper_bound_offset``. The search is complete, and stops, at the first entry whose
        ``last_stable_offset >= upper_bound_offset``: every transaction aborted after it
        started at or after that LSO, so beyond the range (Kafka's rule).
        """
        found: list[AbortedTxn] = []
        with contextlib.closing(self._iter()) as entries:
            for _, txn in entries:
                if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                    found.append(txn)
                if txn.last_stable_offset >= upper_bound_offset:
                    return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def _truncate_file(self, length: int) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd.fd, length)
        else:
            os.truncate(self.path, length)

    def truncate_to(self, offset: int) -> None:
        """Drop the first entry with ``last_offset >= offset`` and everything after it."""
        new_last: int | None = None
        with contextlib.closing(self._iter()) as entries:
            for pos, txn in entries:
                if txn.last_offset >= offset:
                    cut = pos
                    break
                new_last = txn.last_offset
            else:
                return  # nothing at or past the offset: Kafka leaves the file and last offset
        self._truncate_file(cut)
        self._last_offset = new_last

    def reset(self) -> None:
        """Truncate the file (if any) to 0 bytes; the next append may use any offset."""
        if self._fd is not None or self.path.exists():
            self._truncate_file(0)
        self._last_offset = None

    def sanity_check(self) -> None:
        """Every entry's last offset >= ``start_offset``, else CorruptIndexError naming the file."""
        name = self._name
        for _, chunk in self._chunks():
            ix.sanity_check_txn_index(chunk, self.start_offset, name)

    def flush(self) -> None:
        """fsync what this object wrote (nothing to do if it never opened the file)."""
        if self._fd is not None:
            os.fsync(self._fd.fd)

    def close(self) -> None:
        """Close the descriptor, if open. Idempotent."""
        if self._fd is not None:
            handle, self._fd = self._fd, None
            handle.close()

    def delete_if_exists(self) -> bool:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, new_path: str | os.PathLike) -> None:
        """Rename the file (if it exists) and use ``new_path`` from now on; an open
        descriptor keeps working."""
        new = Path(new_path)
        try:
            rename_if_exists(self.path, new)
        finally:
            self.path = new
            if self._fd is not None:
                self._fd.moved_to(new)

    def update_parent_dir(self, new_dir: str | os.PathLike) -> None:
        self.path = Path(new_dir) / self.path.name
        if self._fd is not None:
            self._fd.moved_to(self.path)
