"""The leader-epoch cache of a partition (Kafka's ``LeaderEpochFileCache``).

Entries ``(epoch, start_offset)``: epoch E's records start at ``start_offset``. They are
kept in ascending order of both fields and persisted in ``leader-epoch-checkpoint``
(kafka-format.md §10.2, §12) with the checkpoint write protocol.

* ``assign(epoch, offset)`` adds an entry only when ``epoch`` is above the latest one;
  entries at or after ``offset`` with a lower epoch are removed first (they were written
  by a leader that lost the log from that offset on).
* ``truncate_from_end(offset)`` drops entries starting at or after the new log end.
* ``truncate_from_start(offset)`` moves the first surviving entry's start up to the new
  log start offset.
* ``end_offset_for(epoch)`` answers OffsetsForLeaderEpoch as Kafka's ``endOffsetFor``: the
  start offset of the first epoch above ``epoch`` (the log end offset for the latest epoch),
  with the largest epoch <= the requested one (the requested one itself when it is older than
  every entry); undefined for an epoch above the latest.
"""

from __future__ import annotations

from pathlib import Path

from plog.formats.checkpoints import EpochEntry

from plog.engine.storage.file_names import LEADER_EPOCH_CHECKPOINT

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """In-memory epochs backed by ``<partition dir>/leader-epoch-checkpoint``.

    ``persist=False`` keeps it in memory only (readers that must not write)."""

    def __init__(self, partition_dir: str | Path, *, persist: bool = True):
        self.path = Path(partition_dir) / LEADER_EPOCH_CHECKPOINT
        self.persist = persist
        self.entries: list[EpochEntry] = []
        if self.path.exists():
            from plog.engine.storage.checkpoints import LeaderEpochCheckpointFile

            self.entries = list(LeaderEpochCheckpointFile(self.path).read())

    @property
    def latest_epoch(self) -> int | None:
        return self.entries[-1].epoch if self.entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self.entries[0] if self.entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        if epoch < 0:
            return
        latest = self.latest_epoch
        if latest is not None and epoch <= latest:
            if epoch < latest:
                return
            # Same epoch: keep the earlier start offset (Kafka ignores a later one).
            return
        self.entries = [e for e in self.entries if e.start_offset < start_offset]
        self.entries.append(EpochEntry(epoch, start_offset))
        self._flush()

    def truncate_from_end(self, end_offset: int) -> None:
        kept = [e for e in self.entries if e.start_offset < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        if not self.entries:
            return
        kept = [e for e in self.entries if e.start_offset > start_offset]
        # The entry covering start_offset survives with its start moved up to it.
        covering = [e for e in self.entries if e.start_offset <= start_offset]
        if covering:
            kept.insert(0, EpochEntry(covering[-1].epoch, start_offset))
        if kept != self.entries:
            self.entries = kept
            self._flush()

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: ``(epoch, end offset)`` for ``requested_epoch``."""
        if requested_epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.entries[-1].epoch:
            return requested_epoch, log_end_offset
        lower = [e for e in self.entries if e.epoch <= requested_epoch]
        higher = [e for e in self.entries if e.epoch > requested_epoch]
        if not higher:
            # Above every epoch this replica knows (LeaderEpochFileCache.endOffsetFor).
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if not lower:
            # Older than every epoch here: it ended where this log's first epoch starts.
            return requested_epoch, higher[0].start_offset
        return lower[-1].epoch, higher[0].start_offset

    def clear(self) -> None:
        self.entries = []
        self._flush()

    def _flush(self) -> None:
        if not self.persist:
            return
        from plog.engine.storage.checkpoints import LeaderEpochCheckpointFile

        LeaderEpochCheckpointFile(self.path).write(self.entries)
