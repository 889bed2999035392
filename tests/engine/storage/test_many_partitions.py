"""Many partitions in one process (issue 21, item 1): the descriptor budget
(``engine.descriptor_budget``) keeps a writer or a reader of thousands of partitions under
``ulimit -n``; an index, segment or reader it closes comes back as it was (an active index
keeps its entry count, never its preallocated zero slots); topic creation and added
partitions are all or nothing, and refused before anything is written when they cannot fit.

The limits are real ones: a child process runs under a tiny ``RLIMIT_NOFILE`` (set with
``resource.setrlimit`` before it starts), and the budget sizes itself from it.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from plog.engine.cluster.brokers import stop_broker
from plog.engine.cluster.data_dir import DataDir
from plog.engine.storage.descriptor_budget import MIN_WORKING_SET, ReopenableFile, budget, reset_budget
from plog.engine.errors import (
    BrokerNotAvailableError,
    InvalidPartitionsError,
    KafkaStorageError,
    ResourceLimitError,
)
from plog.engine.storage.file_records import FileBatches
from plog.engine.storage.index import OffsetIndex, TimeIndex
from plog.engine.storage.log_manager import LogManager
from plog.engine.storage.segment import LogSegment
from plog.formats.record_batch import encode_batch

# -- helpers ----------------------------------------------------------------------------------------


@pytest.fixture
def small_budget():
    """A budget of a few descriptors for this test (the process's own limits come back after)."""
    def make(capacity: int):
        return reset_budget(capacity=capacity)
    yield make
    reset_budget()


def _filler(tmp_path: Path, n: int) -> list[ReopenableFile]:
    """``n`` budgeted descriptors on files of their own: each opened after the others is the
    most recently used, so opening them pushes older holders out."""
    d = tmp_path / "filler"
    d.mkdir(exist_ok=True)
    out = []
    for i in range(n):
        p = d / f"f{i}"
        p.write_bytes(b"x")
        out.append(ReopenableFile(p, os.O_RDONLY))
    return out


def _mapped(path: Path) -> bool:
    return str(path) in Path("/proc/self/maps").read_text()


def _open_descriptors_on(path: Path) -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path):
                n += 1
        except OSError:
            pass
    return n


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _partition_folders(dd: DataDir, topic: str) -> list[str]:
    """Every folder of ``topic`` in every broker directory, under any name (-delete included)."""
    out = []
    for b in dd.broker_ids:
        for entry in os.listdir(dd.broker_log_dir(b)):
            if entry.startswith(f"{topic}-"):
                out.append(f"broker-{b}/{entry}")
    return sorted(out)


# -- eviction keeps what was there ------------------------------------------------------------------


def test_an_evicted_active_index_keeps_its_entry_count(tmp_path, small_budget):
    """The budget closes a preallocated (active) offset index's map to make room; its next use
    maps it again with the entries it had, not with every zero slot of the 10 MiB file, and
    closing it then trims the file to those entries (what Kafka's close does)."""
    small_budget(MIN_WORKING_SET)
    path = tmp_path / "00000000000000000000.index"
    idx = OffsetIndex(path, 0)
    idx.append(10, 100)
    idx.append(20, 4200)
    assert path.stat().st_size == 10485760 and idx.entries == 2
    assert _mapped(path)
    others = _filler(tmp_path, MIN_WORKING_SET)  # pushes the index out
    assert not _mapped(path) and _open_descriptors_on(path) == 0
    assert budget().evictions >= 1
    # Counts without mapping it again; then a lookup maps it, as it was.
    assert idx.entries == 2 and idx.max_entries == 1310720 and not idx.is_full()
    assert not _mapped(path)
    assert idx.lookup(15) == (10, 100) and idx.lookup(25) == (20, 4200)
    assert _mapped(path)
    idx.append(30, 8300)
    _filler(tmp_path, MIN_WORKING_SET)
    idx.append(40, 12400)  # an append to an evicted index
    assert idx.entries == 4 and [idx.entry(i) for i in range(4)] == [(10, 100), (20, 4200), (30, 8300), (40, 12400)]
    _filler(tmp_path, MIN_WORKING_SET)
    idx.flush()  # evicted: synced without mapping it again
    idx.close()  # evicted: trimmed without mapping it again
    assert path.stat().st_size == 4 * 8
    again = OffsetIndex(path, 0)
    assert again.entries == 4 and again.lookup(35) == (30, 8300)
    again.close()
    for f in others:
        f.close()


def test_an_evicted_time_index_keeps_its_last_entry(tmp_path, small_budget):
    small_budget(MIN_WORKING_SET)
    path = tmp_path / "00000000000000000000.timeindex"
    idx = TimeIndex(path, 0)
    idx.maybe_append(1000, 5)
    idx.maybe_append(2000, 9)
    _filler(tmp_path, MIN_WORKING_SET)
    assert not _mapped(path)
    assert idx.last_entry == (2000, 9) and idx.entries == 2 and not idx.is_full()
    idx.maybe_append(2000, 12)  # the same timestamp: skipped, as before the eviction
    idx.maybe_append(3000, 14)
    assert idx.entries == 3 and idx.lookup(2500) == (2000, 9)
    idx.close()
    assert path.stat().st_size == 3 * 12


def test_an_evicted_segment_goes_on_where_it_was(tmp_path, small_budget):
    """A segment's .log descriptor closed by the budget: appends, reads and recovery go on on
    the same file, and closing it leaves Kafka's files (trimmed indexes, the batches)."""
    small_budget(MIN_WORKING_SET)
    seg = LogSegment(tmp_path, 0, index_interval_bytes=1)
    for i in range(6):
        raw = encode_batch([(i, 1000 + i, None, b"v%d" % i)], base_offset=i)
        seg.append(i, 1000 + i, i, raw)
        _filler(tmp_path, MIN_WORKING_SET)  # everything of the segment is pushed out each time
        assert _open_descriptors_on(seg.log_path) == 0
    assert [b.base_offset for b in seg.batches()] == list(range(6))
    assert seg.translate_offset(4).offset == 4
    assert seg.read_next_offset() == 6
    assert seg.offset_index.entries == 5  # every append after the first, as Kafka indexes them
    seg.flush()
    seg.close()
    assert (tmp_path / "00000000000000000000.index").stat().st_size == 5 * 8
    assert (tmp_path / "00000000000000000000.timeindex").stat().st_size == 5 * 12  # the close entry is the last one
    reopened = LogSegment(tmp_path, 0, index_interval_bytes=1)
    report = reopened.recover()
    assert report.batches == 6 and report.truncated_bytes == 0 and report.index_entries == 5
    reopened.close()


def test_a_reopened_file_must_be_the_same_file(tmp_path, small_budget):
    """A descriptor closed while idle is reopened by path; if the path now names another file
    (replaced by a rename), nothing is read from it: ESTALE, naming the path."""
    small_budget(MIN_WORKING_SET)
    path = tmp_path / "a.log"
    path.write_bytes(b"first")
    f = ReopenableFile(path, os.O_RDONLY)
    assert os.pread(f.fd, 5, 0) == b"first"
    _filler(tmp_path, MIN_WORKING_SET)
    assert os.pread(f.fd, 5, 0) == b"first"  # reopened: the same file
    _filler(tmp_path, MIN_WORKING_SET)
    (tmp_path / "b.log").write_bytes(b"other")
    os.replace(tmp_path / "b.log", path)
    with pytest.raises(OSError) as e:
        f.fd
    assert e.value.errno == errno.ESTALE and e.value.filename == str(path)
    f.close()
    with pytest.raises(ValueError):
        f.fd


def test_a_file_being_fsynced_is_not_closed_by_the_budget(tmp_path, small_budget, monkeypatch):
    """A writer's flush thread fsyncs a segment while the thread appending beside it opens
    other files: the descriptor it fsyncs is not closed (or its number reused) under it."""
    small_budget(MIN_WORKING_SET)
    f = ReopenableFile(tmp_path / "a.log", os.O_RDWR | os.O_CREAT)
    real_fsync, seen = os.fsync, []

    def fsync(fd):
        _filler(tmp_path, MIN_WORKING_SET)  # as another thread's opens, mid-call
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    f.fsync()
    assert seen == [str(tmp_path / "a.log")]  # the same file, still open, when the call ran
    monkeypatch.setattr(os, "fsync", real_fsync)
    _filler(tmp_path, MIN_WORKING_SET)
    assert _open_descriptors_on(tmp_path / "a.log") == 0  # evictable again once it returned
    f.close()


def test_an_index_evicted_during_its_flush_is_synced_all_the_same(tmp_path, small_budget, monkeypatch):
    """The map an index flush read was closed by an eviction before its msync (the thread
    appending beside a flush): the flush fsyncs the file instead, and says it is flushed."""
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_size=4096)
    idx.append(1, 0)
    idx.append(2, 100)
    mm = idx._mm
    mm.close()  # what _budget_evict does, after the flush read it
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    idx.flush()
    assert synced and idx._flushed_entries == 2
    monkeypatch.setattr(os, "fsync", real_fsync)
    idx._mm = None
    idx.close()


def test_suspended_readers_of_many_files_stay_within_the_budget(tmp_path, small_budget):
    """Readers left between two batches (a consumer of many partitions) hold their descriptors
    only while there is room; each reads its file to the end all the same."""
    b = small_budget(16)
    readers = []
    for i in range(100):
        p = tmp_path / f"{i}.log"
        p.write_bytes(b"".join(encode_batch([(j, 1, None, b"%d-%d" % (i, j))], base_offset=j) for j in range(3)))
        it = iter(FileBatches(p))
        assert next(it).base_offset == 0
        readers.append(it)
        assert b.descriptors + b.pinned <= b.capacity
    assert b.evictions >= 84
    for i, it in enumerate(readers):
        assert [(x.base_offset, x.records()[0].value) for x in it] == [(1, b"%d-1" % i), (2, b"%d-2" % i)]
    assert b.descriptors == 0


def test_holders_dropped_without_closing_are_not_counted(tmp_path, small_budget):
    """A reader or an index dropped without close() (an abandoned view) gives its descriptor
    back when it is collected, and the budget stops counting it."""
    b = small_budget(64)
    log = tmp_path / "a.log"
    log.write_bytes(b"x")
    f = ReopenableFile(log, os.O_RDONLY)
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0)
    idx.append(1, 0)
    assert b.descriptors == 2 and b.mappings == 1 and _open_descriptors_on(log) == 1
    del f, idx
    assert b.descriptors == 0 and b.mappings == 0
    assert _open_descriptors_on(log) == 0 and not _mapped(tmp_path / "00000000000000000000.index")


# -- a real, tiny RLIMIT_NOFILE ---------------------------------------------------------------------

_CHILD = textwrap.dedent("""
    import json, os, sys
    from plog.engine.cluster.data_dir import DataDir
    from plog.engine.storage.descriptor_budget import budget
    from plog.engine.clients.producer import Producer

    path, n = sys.argv[1], int(sys.argv[2])
    dd = DataDir.init(path, brokers=2)
    dd.create_topic("t", n, 2)
    most = 0
    with Producer(dd, linger_ms=3_600_000, batch_size=1 << 20, max_request_size=1 << 24) as p:
        for i in range(n):
            p.send("t", b"v%d" % i, partition=i)
    # Read-only views of every partition, all open at once (a consumer of the whole topic).
    logs = [dd.open_reader(("t", i)) for i in range(n)]
    got = [[r.value.decode() for r in log.read_records()] for log in logs]
    b = budget()
    print(json.dumps({"got": got, "capacity": b.capacity, "held": b.descriptors + b.pinned,
                      "evictions": b.evictions, "open": len(os.listdir("/proc/self/fd"))}))
""")


def _run_child(script: str, nofile: int, *args) -> subprocess.CompletedProcess:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))

    return subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True,
                          preexec_fn=limit, timeout=600)


def test_a_writer_and_readers_of_many_partitions_under_a_tiny_nofile_limit(tmp_path):
    """300 partitions with 2 replicas each, produced to and then all opened for reading, in
    a process that may open 64 files (each replica being written holds a .log and two index
    maps: 1800 descriptors the old way)."""
    n = 300
    p = _run_child(_CHILD, 64, tmp_path / "d", n)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["got"] == [[f"v{i}"] for i in range(n)]
    assert out["held"] <= out["capacity"] < 64 and out["open"] <= 64
    assert out["evictions"] > 0


_TOO_FEW = textwrap.dedent("""
    import os, sys
    from plog.engine.cluster.data_dir import DataDir
    from plog.engine.errors import ResourceLimitError

    dd = DataDir.init(sys.argv[1], brokers=3)
    before = sorted(os.listdir(sys.argv[1]))
    try:
        dd.create_topic("t", 3, 3)
    except ResourceLimitError as e:
        print(e)
    dd.reload()
    print(dd.has_topic("t"), [n for b in (1, 2, 3) for n in os.listdir(f"{sys.argv[1]}/broker-{b}")
                              if n.startswith("t-")])
""")


def test_too_few_descriptors_for_the_locks_is_refused_before_writing(tmp_path):
    """A process whose ulimit -n cannot hold three brokers' locks and a writer's working set
    is told so, naming the limit, and nothing of the topic is written."""
    p = _run_child(_TOO_FEW, 40, tmp_path / "d")
    assert p.returncode == 0, p.stderr
    message, state = p.stdout.splitlines()
    assert "ulimit -n" in message and "this process may open 40" in message and "3 log directories" in message
    assert state == "False []"


# -- all or nothing ---------------------------------------------------------------------------------


def _fail_on_call(monkeypatch, cls, name: str, n: int, exc: BaseException):
    real = getattr(cls, name)
    calls = [0]

    def wrapper(self, *a, **k):
        calls[0] += 1
        if calls[0] == n:
            raise exc
        return real(self, *a, **k)

    monkeypatch.setattr(cls, name, wrapper)
    return calls


@pytest.mark.parametrize("where", ["making a folder", "renaming a folder", "committing", "interrupt"])
def test_creating_a_topic_is_all_or_nothing(tmp_path, monkeypatch, where):
    dd = DataDir.init(tmp_path / "d", brokers=3)
    dd.create_topic("kept", 2, 2)
    before = _tree(dd.path)
    metadata_before = (dd.path / "cluster.json").read_text()
    progress = None
    if where == "making a folder":
        _fail_on_call(monkeypatch, LogManager, "stage_new_log", 70,
                      OSError(errno.ENOSPC, "No space left on device", "somewhere"))
        expected = OSError
    elif where == "renaming a folder":
        _fail_on_call(monkeypatch, LogManager, "adopt_new_logs", 2, OSError(errno.EIO, "Input/output error", "x"))
        expected = OSError
    elif where == "committing":
        import plog.engine.cluster.data_dir as cluster

        def no_room(path, data):
            raise KafkaStorageError(f"Error while writing to file {path}: No space left on device")

        monkeypatch.setattr(cluster, "atomic_write", no_room)
        expected = KafkaStorageError
    else:
        done = [0]

        def progress(n):  # Ctrl-C while the folders are being made
            done[0] += n
            if done[0] == 40:
                raise KeyboardInterrupt

        expected = KeyboardInterrupt
    with pytest.raises(expected):
        dd.create_topic("t", 60, 2, progress=progress)
    monkeypatch.undo()
    dd.reload()
    assert not dd.has_topic("t")
    assert (dd.path / "cluster.json").read_text() == metadata_before
    assert _partition_folders(dd, "t") == []
    # Nothing of it is left, in the folders or in what the writers keep (the checkpoints).
    assert [p for p in _tree(dd.path) if p not in before] == []
    for b in dd.broker_ids:
        lines = (dd.broker_log_dir(b) / "recovery-point-offset-checkpoint").read_text().splitlines()
        assert not [line for line in lines if line.startswith("t ")]
    # ... and the same request works now.
    dd.create_topic("t", 60, 2)
    assert dd.topic("t").partitions == 60
    assert len(_partition_folders(dd, "t")) == 120
    with Producer_(dd) as p:
        for i in range(60):
            p.send("t", b"x", partition=i)
    for i in (0, 59):
        log = dd.open_reader(("t", i))
        assert [r.value for r in log.read_records()] == [b"x"]
        log.close()


def Producer_(dd):
    from plog.engine.clients.producer import Producer

    return Producer(dd, linger_ms=3_600_000)


def test_adding_partitions_is_all_or_nothing(tmp_path, monkeypatch):
    dd = DataDir.init(tmp_path / "d", brokers=2)
    dd.create_topic("t", 3, 2, configs={"retention.ms": "1000"})
    _fail_on_call(monkeypatch, LogManager, "stage_new_log", 20, OSError(errno.ENOSPC, "No space left on device", "x"))
    with pytest.raises(OSError):
        dd.alter_topic("t", partitions=30, set_configs={"retention.ms": "2000"})
    monkeypatch.undo()
    dd.reload()
    t = dd.topic("t")
    assert t.partitions == 3 and t.configs == {"retention.ms": "1000"}
    assert len(_partition_folders(dd, "t")) == 6
    t = dd.alter_topic("t", partitions=30, set_configs={"retention.ms": "2000"})
    assert t.partitions == 30 and t.configs == {"retention.ms": "2000"}
    assert len(_partition_folders(dd, "t")) == 60
    assert all(len(st.isr) == 2 for st in t.states)


def test_a_crash_while_folders_are_made_leaves_nothing_after_the_next_start(tmp_path):
    """The folders are made under Kafka's -delete names: a writer killed before the commit
    leaves folders that the next start-up (plog's, or a Kafka broker's) removes."""
    d = tmp_path / "broker-1"
    lm = LogManager(d)
    staged = lm.stage_new_log(("t", 0), uuid.uuid4())
    assert staged.name.startswith("t-0.") and staged.name.endswith("-delete")
    assert sorted(os.listdir(staged)) == ["00000000000000000000.index", "00000000000000000000.log",
                                          "00000000000000000000.timeindex", "partition.metadata"]
    lm.abandon()  # killed
    again = LogManager(d)
    assert not staged.exists() and again.partitions() == []
    again.close()


# -- refused before anything is written -------------------------------------------------------------


def test_more_partitions_than_the_file_system_holds_are_refused_before_writing(tmp_path):
    dd = DataDir.init(tmp_path / "d")
    dd.create_topic("t", 1)
    before = _tree(dd.path)
    vfs = os.statvfs(dd.path)
    n = vfs.f_favail // 5 + 1000 if vfs.f_files else 100_000_000
    with pytest.raises(ResourceLimitError) as e:
        dd.create_topic("huge", n)
    message = str(e.value)
    assert f"creating {n} partitions of topic huge needs" in message and "nothing was written" in message
    assert str(dd.broker_log_dir(1)) in message
    if vfs.f_files:
        assert f"{n * 5} inodes" in message
    with pytest.raises(ResourceLimitError, match=f"adding {n} partitions to topic t needs"):
        dd.alter_topic("t", partitions=n + 1)
    with pytest.raises(InvalidPartitionsError, match="2147483647"):
        dd.create_topic("huge", 1 << 31)
    with pytest.raises(InvalidPartitionsError, match="2147483647"):
        dd.alter_topic("t", partitions=1 << 31)
    assert _tree(dd.path) == before
    dd.reload()
    assert dd.topics() == ["t"] and dd.topic("t").partitions == 1


def test_new_partitions_go_to_running_brokers(tmp_path):
    """As Kafka's controller places replicas only on brokers it can use: a stopped broker gets
    none (its directory is not opened); a replica named on it by hand is refused before
    anything is written."""
    dd = DataDir.init(tmp_path / "d", brokers=3)
    stop_broker(dd, 3)
    dd.reload()
    t = dd.create_topic("t", 6, 2)
    assert {b for reps in t.replicas for b in reps} == {1, 2}
    assert [n for n in os.listdir(dd.broker_log_dir(3)) if n.startswith("t-")] == []
    t = dd.alter_topic("t", partitions=9)
    assert {b for reps in t.replicas for b in reps} == {1, 2}
    before = _tree(dd.path)
    with pytest.raises(BrokerNotAvailableError, match="broker 3 is stopped"):
        dd.create_topic("u", replica_assignment={0: [1, 3]})
    assert _tree(dd.path) == before
