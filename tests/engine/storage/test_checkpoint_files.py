"""Checkpoint-style files: Kafka's write protocol, and round trips of real corpus files."""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import uuid

import pytest
from conftest import CORPUS, corpus_files

from plog.engine.storage import checkpoints as cf
from plog.engine.storage.checkpoints import (
    CleanShutdownFile,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    atomic_write,
    read_meta_properties,
    write_meta_properties,
)
from plog.engine.errors import KafkaStorageError
from plog.engine.storage.file_names import TopicPartition
from plog.formats import checkpoints as ck
from plog.formats.errors import CheckpointError


def _ids(paths):
    return [str(p.relative_to(CORPUS)) for p in paths]


def _copy(src, directory, name=None):
    """A writable copy (corpus files are read-only) under the file's own name."""
    dst = directory / (name or src.name)
    shutil.copyfile(src, dst)
    return dst


# -- atomic_write -------------------------------------------------------------------------


def test_atomic_write_bytes_and_str_leave_no_tmp(tmp_path):
    target = tmp_path / "f"
    atomic_write(target, b"\x00\xffbytes")
    assert target.read_bytes() == b"\x00\xffbytes"
    atomic_write(target, "ünïcode\n")
    assert target.read_bytes() == "ünïcode\n".encode("utf-8")
    assert sorted(os.listdir(tmp_path)) == ["f"]


def test_atomic_write_overwrites_a_tmp_left_by_a_crash(tmp_path):
    target = tmp_path / "recovery-point-offset-checkpoint"
    target.write_bytes(b"0\n0\n")
    # A previous writer died after writing more than we will write now.
    (tmp_path / (target.name + ".tmp")).write_bytes(b"garbage" * 1000)
    atomic_write(target, b"0\n1\nt 0 5\n")
    assert target.read_bytes() == b"0\n1\nt 0 5\n"
    assert sorted(os.listdir(tmp_path)) == [target.name]


def test_atomic_write_fsyncs_file_then_renames_then_fsyncs_dir(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        st = os.fstat(fd)
        events.append(("fsync-dir" if stat.S_ISDIR(st.st_mode) else "fsync-file", st.st_ino))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", os.stat(src).st_ino))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    target = tmp_path / "f"
    atomic_write(target, b"data")
    file_ino, dir_ino = target.stat().st_ino, tmp_path.stat().st_ino
    assert events == [("fsync-file", file_ino), ("replace", file_ino), ("fsync-dir", dir_ino)]


def test_atomic_write_failure_keeps_old_content_and_removes_tmp(tmp_path, monkeypatch):
    target = tmp_path / "f"
    target.write_bytes(b"old")

    def failing_replace(src, dst):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(KafkaStorageError) as e:
        atomic_write(target, b"new")
    assert str(target) in str(e.value) and "Input/output error" in str(e.value)
    assert isinstance(e.value.__cause__, OSError)
    assert target.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["f"]


def test_atomic_write_failing_fsync_removes_tmp(tmp_path, monkeypatch):
    def failing_fsync(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(KafkaStorageError, match="No space left"):
        atomic_write(tmp_path / "f", b"new")
    assert os.listdir(tmp_path) == []


def test_atomic_write_failing_dir_fsync_is_reported(tmp_path, monkeypatch):
    real_fsync = os.fsync

    def fsync(fd):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EIO, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(KafkaStorageError, match="syncing the directory"):
        atomic_write(tmp_path / "f", b"new")
    # the rename happened; only its durability is unknown
    assert (tmp_path / "f").read_bytes() == b"new"
    assert os.listdir(tmp_path) == ["f"]


def test_atomic_write_into_missing_dir(tmp_path):
    with pytest.raises(KafkaStorageError, match=re.escape(str(tmp_path / "nope" / "f"))):
        atomic_write(tmp_path / "nope" / "f", b"x")


def test_atomic_write_relative_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    atomic_write("rel", b"x")
    assert (tmp_path / "rel").read_bytes() == b"x"


# -- offset checkpoints -------------------------------------------------------------------

OFFSET_CHECKPOINTS = corpus_files(lambda n: n in ck.OFFSET_CHECKPOINT_FILES)


def test_corpus_has_every_offset_checkpoint_kind(corpus):
    assert {p.name for p in OFFSET_CHECKPOINTS} == set(ck.OFFSET_CHECKPOINT_FILES)


@pytest.mark.parametrize("src", OFFSET_CHECKPOINTS, ids=_ids(OFFSET_CHECKPOINTS))
def test_offset_checkpoint_round_trip(src, tmp_path):
    path = _copy(src, tmp_path)
    f = OffsetCheckpointFile(path)
    offsets = f.read()
    assert all(type(tp) is TopicPartition and isinstance(o, int) for tp, o in offsets.items())
    f.write(offsets)
    assert OffsetCheckpointFile(path).read() == offsets
    original, written = src.read_bytes(), path.read_bytes()
    if original:
        # Kafka writes in hash order and we sort: same header, same set of lines.
        o_lines, w_lines = original.split(b"\n"), written.split(b"\n")
        assert o_lines[:2] == w_lines[:2]
        assert sorted(o_lines[2:]) == sorted(w_lines[2:])
    else:
        assert written == b"0\n0\n"
    assert sorted(os.listdir(tmp_path)) == [src.name]


def test_offset_checkpoint_missing_reads_empty_and_creates_nothing(tmp_path):
    f = OffsetCheckpointFile.in_log_dir(tmp_path, cf.RECOVERY_POINT_CHECKPOINT)
    assert f.read() == {}
    assert not f.exists()
    assert os.listdir(tmp_path) == []


def test_offset_checkpoint_create_if_missing_is_for_writers(tmp_path):
    f = OffsetCheckpointFile.in_log_dir(tmp_path, cf.REPLICATION_OFFSET_CHECKPOINT,
                                        create_if_missing=True)
    assert f.exists() and (tmp_path / cf.REPLICATION_OFFSET_CHECKPOINT).read_bytes() == b""
    f.write({("b", 1): 7, TopicPartition("a", 0): 3})
    assert (tmp_path / cf.REPLICATION_OFFSET_CHECKPOINT).read_bytes() == b"0\n2\na 0 3\nb 1 7\n"
    # an existing file is left alone
    OffsetCheckpointFile(f.path, create_if_missing=True)
    assert f.read() == {("a", 0): 3, ("b", 1): 7}
    assert str(next(iter(f.read()))) in ("a-0", "b-1")
    with pytest.raises(ValueError):
        OffsetCheckpointFile.in_log_dir(tmp_path, "leader-epoch-checkpoint")


def test_offset_checkpoint_malformed_names_the_path(tmp_path):
    path = tmp_path / cf.LOG_START_OFFSET_CHECKPOINT
    path.write_bytes(b"0\n2\nt 0 1\n")
    with pytest.raises(CheckpointError) as e:
        OffsetCheckpointFile(path).read()
    assert str(e.value) == f"Expected [2] entries in checkpoint file [{path}], but found only [1]"
    path.write_bytes(b"0\n1\nt 0\n")
    with pytest.raises(CheckpointError, match=re.escape(f"Malformed line in checkpoint file [{path}]: t 0")):
        OffsetCheckpointFile(path).read()
    path.write_bytes(b"1\n0\n")
    with pytest.raises(CheckpointError, match=re.escape(str(path))):
        OffsetCheckpointFile(path).read()


def test_offset_checkpoint_unreadable_is_a_storage_error(tmp_path):
    (tmp_path / cf.CLEANER_OFFSET_CHECKPOINT).mkdir()
    with pytest.raises(KafkaStorageError, match=re.escape(str(tmp_path / cf.CLEANER_OFFSET_CHECKPOINT))):
        OffsetCheckpointFile(tmp_path / cf.CLEANER_OFFSET_CHECKPOINT).read()


# -- leader-epoch-checkpoint --------------------------------------------------------------

EPOCH_CHECKPOINTS = corpus_files(lambda n: n == ck.LEADER_EPOCH_CHECKPOINT)


@pytest.mark.parametrize("src", EPOCH_CHECKPOINTS, ids=_ids(EPOCH_CHECKPOINTS))
def test_leader_epoch_checkpoint_round_trip_is_byte_exact(src, tmp_path):
    path = _copy(src, tmp_path)
    f = LeaderEpochCheckpointFile(path)
    entries = f.read()
    assert all(isinstance(e, ck.EpochEntry) for e in entries)
    path.unlink()
    f.write(entries)
    # An empty file and "0\n0\n" both mean no entries; Kafka writes the latter.
    assert path.read_bytes() == (src.read_bytes() or b"0\n0\n")
    assert LeaderEpochCheckpointFile.in_dir(tmp_path).read() == entries


def test_leader_epoch_checkpoint_missing_and_malformed(tmp_path):
    f = LeaderEpochCheckpointFile.in_dir(tmp_path)
    assert f.read() == []
    assert os.listdir(tmp_path) == []
    f.write([(0, 0), (3, 120)])
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == b"0\n2\n0 0\n3 120\n"
    (tmp_path / "leader-epoch-checkpoint").write_bytes(b"0\n1\n0 0 0\n")
    with pytest.raises(CheckpointError, match=re.escape(f"[{tmp_path / 'leader-epoch-checkpoint'}]")):
        f.read()


# -- partition.metadata -------------------------------------------------------------------

PARTITION_METADATA = corpus_files(lambda n: n == ck.PARTITION_METADATA)


@pytest.mark.parametrize("src", PARTITION_METADATA, ids=_ids(PARTITION_METADATA))
def test_partition_metadata_round_trip_is_byte_exact(src, tmp_path):
    path = _copy(src, tmp_path)
    meta = PartitionMetadataFile(path).read()
    assert meta.version == 0 and isinstance(meta.topic_id, uuid.UUID)
    path.unlink()
    PartitionMetadataFile.in_dir(tmp_path).write(meta.topic_id)
    assert path.read_bytes() == src.read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["partition.metadata"]


def test_partition_metadata_missing_and_invalid(tmp_path):
    f = PartitionMetadataFile.in_dir(tmp_path)
    assert f.read() is None and not f.exists()
    with pytest.raises(ValueError):
        f.write(uuid.UUID(int=0))
    assert not f.exists()
    (tmp_path / "partition.metadata").write_bytes(b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA")
    with pytest.raises(CheckpointError, match=re.escape(str(tmp_path / "partition.metadata"))):
        f.read()


# -- meta.properties ----------------------------------------------------------------------

META_PROPERTIES = corpus_files(lambda n: n == ck.META_PROPERTIES)


@pytest.mark.parametrize("src", META_PROPERTIES, ids=_ids(META_PROPERTIES))
def test_meta_properties_round_trip_is_byte_exact_for_some_jdk_order(src, tmp_path):
    _copy(src, tmp_path)
    meta = read_meta_properties(tmp_path)
    assert isinstance(meta, ck.MetaProperties)
    original = src.read_bytes()
    date = original.split(b"\n")[1][1:].decode("ascii")
    written = set()
    for order in ("sorted", "concurrent-hash-map", "hashtable"):
        write_meta_properties(tmp_path, meta, date=date, order=order)
        written.add((tmp_path / "meta.properties").read_bytes())
        assert read_meta_properties(tmp_path) == meta
    assert original in written
    assert sorted(os.listdir(tmp_path)) == ["meta.properties"]


def test_meta_properties_default_date_and_sorted_keys(tmp_path):
    assert read_meta_properties(tmp_path) is None
    meta = ck.MetaProperties(1, "MkU3OEVBNTcwNTJENDM2Qg", 1, uuid.UUID(int=12345))
    write_meta_properties(tmp_path, meta)
    lines = (tmp_path / "meta.properties").read_text().split("\n")
    assert lines[0] == "#"
    assert re.fullmatch(r"#(Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d \S+ \d{4}", lines[1])
    keys = [line.split("=")[0] for line in lines[2:] if line]
    assert keys == sorted(keys) == ["cluster.id", "directory.id", "node.id", "version"]
    assert lines[-1] == ""
    assert read_meta_properties(tmp_path) == meta


def test_meta_properties_invalid_names_the_file(tmp_path):
    (tmp_path / "meta.properties").write_bytes(b"version=1\nnode.id=1\n")
    with pytest.raises(CheckpointError) as e:
        read_meta_properties(tmp_path)
    assert str(tmp_path / "meta.properties") in str(e.value)
    assert "cluster.id was not found." in str(e.value)


# -- .kafka_cleanshutdown -----------------------------------------------------------------

CLEAN_SHUTDOWNS = corpus_files(lambda n: n == ck.CLEAN_SHUTDOWN)


def test_corpus_clean_shutdown_files(corpus, tmp_path):
    assert len(CLEAN_SHUTDOWNS) >= 2
    seen = set()
    for i, src in enumerate(CLEAN_SHUTDOWNS):
        log_dir = tmp_path / str(i)
        log_dir.mkdir()
        _copy(src, log_dir)
        f = CleanShutdownFile(log_dir)
        assert f.exists()
        epoch = f.read()
        seen.add(epoch)
        if epoch is not None:
            # Kafka >= 3.7 JSON: our writer reproduces it byte for byte.
            f.write(epoch)
            assert (log_dir / ".kafka_cleanshutdown").read_bytes() == src.read_bytes()
        else:
            assert src.read_bytes() == b""
        assert f.delete() is True
        assert not f.exists() and f.delete() is False
        assert os.listdir(log_dir) == []
    assert None in seen and 7118 in seen


def test_clean_shutdown_write_read_delete(tmp_path):
    f = CleanShutdownFile(tmp_path)
    assert not f.exists() and f.read() is None
    f.write()
    assert (tmp_path / ".kafka_cleanshutdown").read_bytes() == b'{"version":0,"brokerEpoch":-1}'
    assert f.read() == -1
    f.write(42)
    assert f.read() == 42
    assert os.listdir(tmp_path) == [".kafka_cleanshutdown"]
    (tmp_path / ".kafka_cleanshutdown").write_bytes(b"{nope")
    with pytest.raises(CheckpointError, match=re.escape(str(tmp_path / ".kafka_cleanshutdown"))):
        f.read()
    assert f.delete()


def test_clean_shutdown_delete_fsyncs_the_dir(tmp_path, monkeypatch):
    CleanShutdownFile(tmp_path).write()
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.fstat(fd).st_ino), real_fsync(fd)))
    assert CleanShutdownFile(tmp_path).delete()
    assert synced == [tmp_path.stat().st_ino]
