"""The one checkpoint reader (``discovery.read_checkpoints``) as maintenance uses it: recovery
reads a malformed checkpoint as empty (Kafka's ``LogManager``); the cleaner and the runner stop
at one (a broker would take the log directory offline); an unreadable or missing file is empty
for all of them. And the cleaner's ``BatchRetention`` decision, unit by unit."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from plog.engine.maintenance.batch_filter import DELETE, DELETE_EMPTY, RETAIN_EMPTY, batch_retention
from plog.engine.maintenance.cleaner_manager import read_cleaner_offsets, update_cleaner_offsets
from plog.engine.maintenance.recovery import plan_recovery
from plog.engine.maintenance.runner import MaintenanceOptions, run_compaction
from plog.engine.storage.checkpoints import OffsetCheckpointFile
from plog.engine.storage.discovery import read_checkpoints
from plog.engine.storage.file_names import TopicPartition
from plog.engine.storage.log_manager import LogManager
from plog.formats.errors import CheckpointError
from plog.formats.record_batch import encode_batch


def _log_dir(tmp_path):
    d = tmp_path / "logs"
    with LogManager(d) as lm:
        log = lm.get_or_create_log(("t", 0), config={"cleanup.policy": "compact"})
        for i in range(3):
            log.append_as_leader(encode_batch([(0, 1_700_000_000_000 + i, b"k", b"v%d" % i)]))
    return d


def test_cleaner_offsets_round_trip_and_drop_absent_partitions(tmp_path):
    update_cleaner_offsets(tmp_path, {TopicPartition("t", 0): 5, TopicPartition("gone", 1): 9},
                           {TopicPartition("t", 0)})
    assert OffsetCheckpointFile(tmp_path / "cleaner-offset-checkpoint").read() == {("t", 0): 5}
    offsets = read_cleaner_offsets(tmp_path)
    assert offsets == {("t", 0): 5}
    offsets[TopicPartition("t", 1)] = 7  # the caller owns its copy: the shared result is untouched
    assert read_checkpoints(tmp_path).cleaner_offsets == {("t", 0): 5}


def test_a_missing_or_unreadable_cleaner_checkpoint_is_empty(tmp_path):
    assert read_cleaner_offsets(tmp_path) == {}
    (tmp_path / "cleaner-offset-checkpoint").mkdir()  # an I/O error, not content
    assert read_cleaner_offsets(tmp_path) == {}


def test_a_malformed_cleaner_checkpoint_stops_the_cleaner(tmp_path):
    (tmp_path / "cleaner-offset-checkpoint").write_text("garbage\n")
    with pytest.raises(CheckpointError, match="Malformed line in checkpoint file"):
        read_cleaner_offsets(tmp_path)
    assert "cleaner-offset-checkpoint" in read_checkpoints(tmp_path).problems


@pytest.mark.parametrize("name", ["log-start-offset-checkpoint", "replication-offset-checkpoint",
                                  "cleaner-offset-checkpoint"])
def test_a_malformed_checkpoint_stops_a_compaction_plan(tmp_path, name):
    d = _log_dir(tmp_path)
    (d / name).write_text("garbage\n")
    with pytest.raises(CheckpointError, match=name):
        run_compaction(d, MaintenanceOptions(dry_run=True, force=True))


def test_recovery_reads_a_malformed_recovery_point_checkpoint_as_empty(tmp_path):
    d = _log_dir(tmp_path)
    (d / ".kafka_cleanshutdown").unlink()
    (d / "recovery-point-offset-checkpoint").write_text("garbage\n")
    plan = plan_recovery(d)
    (part,) = plan.partitions
    assert part.recovery_point == 0 and part.revalidate_from == 0
    assert [r.file for r in part.revalidate] == ["00000000000000000000.log"]


@dataclass
class _Batch:
    producer_id: int = -1
    producer_epoch: int = 0
    last_offset: int = 10
    next_offset: int = 11
    is_control: bool = False


@pytest.mark.parametrize("batch,active,upper,discard,expected", [
    (_Batch(), {}, 100, False, DELETE_EMPTY),
    (_Batch(), {}, 100, True, DELETE),
    (_Batch(), {}, 11, True, RETAIN_EMPTY),  # the batch that ends the clean keeps the log end
    (_Batch(producer_id=4), {4: (10, 0)}, 100, True, RETAIN_EMPTY),  # an active producer's last batch
    (_Batch(producer_id=4), {4: (12, 0)}, 100, True, DELETE),
    (_Batch(producer_id=4, is_control=True, producer_epoch=2), {4: (-1, 2)}, 100, True, RETAIN_EMPTY),
    (_Batch(producer_id=4, is_control=True, producer_epoch=1), {4: (-1, 2)}, 100, True, DELETE),
])
def test_batch_retention(batch, active, upper, discard, expected):
    assert batch_retention(batch, active, upper, discard) == expected
