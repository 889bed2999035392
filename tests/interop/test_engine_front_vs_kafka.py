"""plog's engine front (data directory, producer, consumer, groups, CLI) against real Kafka.

Both versions of ``kafka_versions.VERSIONS``; the brokers are the suite's:

* **Key partitioning.** A fresh broker gets two 7-partition topics; kafka-python and
  Kafka's own Java producer (``ConsoleProducer``, ``parse.key``) send keys of every length
  0..20, UTF-8 keys, random binary keys (kafka-python only: the console producer reads
  text) and long keys. The partition the broker acknowledged (kafka-python) or stored the
  record in (Java) equals the partition plog's ``Producer`` chose for the same key in a
  plog data directory with a 7-partition topic, and ``partitioner.partition_for_key``.
* **Reading a stopped broker's log directory** (the shared "Kafka writes" scenario,
  ``kafka_written``, copied): ``plog groups describe --format json`` shows exactly the
  offsets the scenario's consumer group committed (what kafka-python's ``committed()``, an
  OffsetFetch to the broker, returned) with the broker's log end offsets and lag;
  ``plog consume --isolation-level read_committed -e --format jsonl`` on the
  transactional topic returns exactly what kafka-python read with read_committed (and the
  manifest's committed and non-transactional records), read_uncommitted adds the aborted
  transactions.
* **Group commits written by plog, read by Kafka.** A plog data directory gets a topic,
  records and two groups (a subscribed member, which also writes GroupMetadata, and a
  standalone consumer); Kafka's DumpLogSegments ``--offsets-decoder`` decodes every commit
  (group, topic, partition, offset, in order) and the GroupMetadata record (protocol type
  ``consumer``, generation, protocol, leader, the member, its subscription and
  assignment); ``plog dump --offsets-decoder`` prints the same.
* **A broker serves plog's group offsets.** The fresh broker above (created with 50
  ``__consumer_offsets`` partitions, as plog's data directories have) also creates plog's
  topic and is stopped; plog's partition folders (topic and ``__consumer_offsets-<p>`` of
  each group; the broker's ``partition.metadata`` kept) and checkpoint entries go into a
  copy, a broker starts on it, and ``list_group_offsets`` answers exactly plog's commits;
  a kafka-python consumer of the group starts at them.

"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kafka_broker import TOOL_JVM_OPTS, UTF8_OUTPUT_OPTS, _log_opts, copy_log_dir, java_env, write_log_configs
from kafka_files import read_offset_checkpoint, write_offset_checkpoint
from kafka_scenarios import GROUP_ID, MULTI_TOPIC, TXN_TOPIC, _create_topics, _producer, consume_all
from kafka_versions import major

from plog.formats.binary_json import decode_bytes
from plog.engine.cluster.data_dir import DataDir
from plog.engine.clients.consumer import Consumer
from plog.engine.groups.coordinator import GroupCoordinator
from plog.engine.clients.partitioner import partition_for_key
from plog.engine.clients.producer import Producer
from plog.formats.offsets_topic import partition_for_group

pytestmark = pytest.mark.interop

OFFSETS_TOPIC = "__consumer_offsets"
#: plog's data directories have 50 __consumer_offsets partitions (Kafka's default); the
#: suite's brokers are configured with 3, except the ones here that serve plog's files.
OFFSETS_PARTITIONS = 50
BROKER_SETTINGS = {"offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)}

KEYS_TOPIC = "front-keys"  # kafka-python sends here
KEYS_JAVA_TOPIC = "front-keys-java"  # Kafka's ConsoleProducer sends here
KEY_PARTITIONS = 7

PLOG_TOPIC = "front-orders"
PLOG_TOPIC_PARTITIONS = 3
PLOG_GROUP = "front-group"  # a subscribed member: commits and GroupMetadata
PLOG_STANDALONE = "front-standalone"  # assign() and commit(): no member, offsets only
PLOG_RECORDS = 90


# -- helpers ------------------------------------------------------------------------------------


def plog_cli(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    """The ``plog`` script of this venv (``python -m plog.cli`` when there is none), as a
    user runs it; stdout and stderr are bytes."""
    exe = Path(sys.executable).with_name("plog")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "plog.cli"]
    env = {k: v for k, v in os.environ.items() if k != "PLOG_DATA_DIR"}
    return subprocess.run([*cmd, *map(str, args)], capture_output=True, timeout=timeout, env=env)


def _ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, (f"{' '.join(map(str, proc.args))} exited {proc.returncode}\n"
                                  f"stderr: {proc.stderr.decode(errors='replace')[-3000:]}")
    return proc.stdout.decode("utf-8")


def sample_keys() -> list[bytes]:
    """Keys of every length 0..20 (text and binary), UTF-8, random and long ones; unique."""
    rng = random.Random(794)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/"
    keys = [alphabet[:n].encode() for n in range(21)]
    keys += [bytes(rng.randrange(128, 256) for _ in range(n)) for n in range(1, 21)]  # high bytes: sign bugs
    keys += [bytes(rng.randrange(256) for _ in range(n)) for n in range(1, 21)]
    keys += [t.encode() for t in ("é", "ü" * 5, "ключ", "日本語のキー", "emoji 🎉✓", "Ωmega-Ω",
                                  "naïve café", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "user-42", "order/2024/05/01")]
    keys += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 64))).encode() for _ in range(40)]
    keys += [bytes(rng.randrange(256) for _ in range(rng.randint(21, 100))) for _ in range(20)]
    keys += [b"x" * 1000, bytes(range(256)) * 3]
    return list(dict.fromkeys(keys))


def _is_text_key(key: bytes) -> bool:
    """A key the console producer can send: UTF-8, no separator or line break."""
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return not any(c in text for c in "\t\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


def console_producer_class(version: str) -> str:
    return "org.apache.kafka.tools.ConsoleProducer" if major(version) >= 4 else "kafka.tools.ConsoleProducer"


def java_console_produce(version: str, jars: Path, log_configs: dict, bootstrap: str, topic: str,
                         keys: list[bytes]) -> None:
    """Kafka's own Java producer (ConsoleProducer: the built-in partitioner) sends one record
    per key, ``key<TAB>value`` lines on stdin."""
    lines = "".join(f"{k.decode()}\tjava-{i}\n" for i, k in enumerate(keys)).encode()
    cmd = ["java", *TOOL_JVM_OPTS, *UTF8_OUTPUT_OPTS, *_log_opts(log_configs, "tools"), "-cp", f"{jars}/*",
           console_producer_class(version), "--bootstrap-server", bootstrap, "--topic", topic,
           "--property", "parse.key=true", "--property", "key.separator=\t",
           "--producer-property", "acks=all", "--producer-property", "linger.ms=5"]
    proc = subprocess.run(cmd, input=lines, capture_output=True, timeout=300, env=java_env())
    assert proc.returncode == 0, f"ConsoleProducer exited {proc.returncode}: {proc.stderr.decode(errors='replace')}"


def _retry(what: str, call, timeout: float = 60):
    """Call until it stops raising kafka-python errors (a coordinator loading, a topic
    being created)."""
    from kafka.errors import KafkaError

    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except KafkaError as e:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: still failing after {timeout:.0f} s: {e!r}") from e
            time.sleep(0.5)


def _admin(bootstrap: str):
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000, client_id="plog-front")


# -- plog's side: a data directory with a topic, records and committed groups ------------------


@dataclass
class PlogGroups:
    data_dir: Path
    end_offsets: dict  # (topic, p) -> log end offset
    commits: dict  # group -> [{(topic, p): offset}] in commit order
    final: dict  # group -> {(topic, p): offset}
    member_id: str
    client_id: str
    engine_committed: dict  # group -> {(topic, p): offset}, GroupCoordinator.committed after close

    def partitions(self) -> list[tuple[str, int]]:
        return [(PLOG_TOPIC, p) for p in range(PLOG_TOPIC_PARTITIONS)]

    def offsets_partitions(self) -> list[int]:
        return sorted({partition_for_group(g, OFFSETS_PARTITIONS) for g in self.commits})

    @property
    def broker_dir(self) -> Path:
        return self.data_dir / "broker-1"


def _positions(consumer: Consumer, tps) -> dict:
    return {(t, p): consumer.position((t, p)) for t, p in tps}


@pytest.fixture(scope="session")
def plog_groups(tmp_path_factory) -> PlogGroups:
    path = tmp_path_factory.mktemp("plog-front-groups") / "data"
    dd = DataDir.init(path, brokers=1)
    dd.create_topic(PLOG_TOPIC, PLOG_TOPIC_PARTITIONS, 1)
    with Producer(dd) as producer:
        futures = [producer.send(PLOG_TOPIC, f"value-{i}".encode(), key=f"key-{i}".encode())
                   for i in range(PLOG_RECORDS)]
        acked = [f.get() for f in futures]
    ends = {(PLOG_TOPIC, p): 0 for p in range(PLOG_TOPIC_PARTITIONS)}
    for md in acked:
        ends[(md.topic, md.partition)] = max(ends[(md.topic, md.partition)], md.offset + 1)
    assert all(ends.values()), f"every partition needs records: {ends}"
    tps = list(ends)
    commits: dict[str, list[dict]] = {PLOG_GROUP: [], PLOG_STANDALONE: []}

    # A subscribed member: a commit part way (every assigned partition's position), one at the end.
    consumer = Consumer(dd, group_id=PLOG_GROUP, auto_offset_reset="earliest", enable_auto_commit=False,
                        max_poll_records=7)
    try:
        consumer.subscribe([PLOG_TOPIC])
        assert sorted(consumer.assignment()) == tps
        first = consumer.poll(5000)
        assert 0 < len(first) <= 7
        commits[PLOG_GROUP].append(_positions(consumer, tps))
        consumer.commit()
        deadline = time.monotonic() + 60
        while not consumer.at_end():
            assert time.monotonic() < deadline, "plog's consumer did not reach the end"
            consumer.poll(100)
        commits[PLOG_GROUP].append(_positions(consumer, tps))
        assert commits[PLOG_GROUP][-1] == ends
        consumer.commit()
        membership = GroupCoordinator(dd).membership(PLOG_GROUP)
        assert len(membership.members) == 1
        (member,) = membership.members.values()
    finally:
        consumer.close()

    # A standalone consumer (assign): commits its positions, then rewinds one partition.
    standalone = Consumer(dd, group_id=PLOG_STANDALONE, auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        mine = [(PLOG_TOPIC, 0), (PLOG_TOPIC, 2)]
        standalone.assign(mine)
        deadline = time.monotonic() + 60
        while not standalone.at_end():
            assert time.monotonic() < deadline, "plog's standalone consumer did not reach the end"
            standalone.poll(100)
        commits[PLOG_STANDALONE].append(_positions(standalone, mine))
        standalone.commit()
        rewind = {(PLOG_TOPIC, 0): 3}
        commits[PLOG_STANDALONE].append(rewind)
        standalone.commit(rewind)
    finally:
        standalone.close()

    final = {}
    for group, done in commits.items():
        final[group] = {}
        for c in done:
            final[group].update(c)
    coordinator = GroupCoordinator(DataDir.open(path))
    engine = {g: {(tp.topic, tp.partition): c.offset for tp, c in coordinator.committed(g).items()} for g in commits}
    return PlogGroups(path, ends, commits, final, member.member_id, member.client_id, engine)


def test_plog_engine_reads_its_own_commits(plog_groups):
    """The baseline of the Kafka comparisons below: ``GroupCoordinator.committed`` returns
    what the consumers committed."""
    assert plog_groups.engine_committed == plog_groups.final
    assert plog_groups.final[PLOG_STANDALONE] == {(PLOG_TOPIC, 0): 3,
                                                  (PLOG_TOPIC, 2): plog_groups.end_offsets[(PLOG_TOPIC, 2)]}


# -- Kafka's side: a fresh broker (keys; the template for serving plog's files) -----------------


@dataclass
class FreshRun:
    version: str
    bootstrap_partitions: dict  # kafka-python: key -> partition acknowledged by the broker
    java_partitions: dict  # ConsoleProducer: key -> partition the record was stored in
    template: Path  # the stopped broker's log dir: plog's topic and 50 __consumer_offsets partitions


@dataclass
class ServedRun:
    version: str
    log_dir: Path
    group_offsets: dict  # group -> {(topic, p): offset}, from the broker's OffsetFetch
    group_descriptions: dict  # group -> kafka-python's describe_groups entry
    positions: dict  # group -> {(topic, p): position of a kafka-python consumer of the group}
    end_offsets: dict  # (topic, p) -> ListOffsets end offset
    consumed: dict = field(default_factory=dict)  # (topic, p) -> [Consumed]


class _PerVersion:
    """A per-version cache; a failure is remembered, not retried."""

    def __init__(self, what: str, build):
        self.what = what
        self.build = build
        self.done: dict = {}

    def __call__(self, version: str):
        if version not in self.done:
            try:
                self.done[version] = self.build(version)
            except (pytest.skip.Exception, pytest.fail.Exception):
                raise
            except Exception as e:  # noqa: BLE001
                self.done[version] = e
                raise
        got = self.done[version]
        if isinstance(got, Exception):
            pytest.fail(f"{self.what} with Kafka {version} failed earlier: {type(got).__name__}: {got}", pytrace=False)
        return got


@pytest.fixture(scope="session")
def kafka_fresh(kafka_broker, kafka_jars, tmp_path_factory):
    log_configs = write_log_configs(tmp_path_factory.mktemp("front-java-logging"))

    def build(version: str) -> FreshRun:
        keys = sample_keys()
        broker = kafka_broker(version, settings=BROKER_SETTINGS)
        try:
            _create_topics(broker.bootstrap, {
                KEYS_TOPIC: {"partitions": KEY_PARTITIONS, "configs": {}},
                KEYS_JAVA_TOPIC: {"partitions": KEY_PARTITIONS, "configs": {}},
                PLOG_TOPIC: {"partitions": PLOG_TOPIC_PARTITIONS, "configs": {}},
            })
            broker.wait_partitions_ready([(t, p) for t in (KEYS_TOPIC, KEYS_JAVA_TOPIC) for p in range(KEY_PARTITIONS)]
                                         + [(PLOG_TOPIC, p) for p in range(PLOG_TOPIC_PARTITIONS)])
            # kafka-python's default partitioner (murmur2, as the Java client): what the broker acknowledged.
            producer = _producer(broker.bootstrap)
            try:
                futures = [(k, producer.send(KEYS_TOPIC, key=k, value=b"kafka-python-%d" % i))
                           for i, k in enumerate(keys)]
                producer.flush()
                acked = {k: f.get(timeout=60).partition for k, f in futures}
            finally:
                producer.close()
            # Kafka's Java producer: where each record is stored, read back by key.
            text_keys = [k for k in keys if _is_text_key(k)]
            java_console_produce(version, kafka_jars(version), log_configs, broker.bootstrap, KEYS_JAVA_TOPIC,
                                 text_keys)
            read, _ends = consume_all(broker.bootstrap, [(KEYS_JAVA_TOPIC, p) for p in range(KEY_PARTITIONS)])
            java: dict[bytes, int] = {}
            for (_t, p), records in read.items():
                for r in records:
                    assert r.key not in java, f"key {r.key!r} stored twice"
                    java[r.key] = p
            # The group coordinator's topic, with plog's partition count (created on first use).
            admin = _admin(broker.bootstrap)
            try:
                _retry("creating __consumer_offsets", lambda: admin.list_group_offsets("front-trigger"))
            finally:
                admin.close()
            broker.wait_partitions_ready([(OFFSETS_TOPIC, p) for p in range(OFFSETS_PARTITIONS)])
            broker.stop()
        except BaseException:
            broker.kill()
            raise
        template = copy_log_dir(broker.log_dir, tmp_path_factory.mktemp(f"front-{version}-fresh") / "logs")
        return FreshRun(version, acked, java, template)

    return _PerVersion("the fresh broker run (keys, template)", build)


def install_plog_partitions(plog_broker_dir: Path, log_dir: Path, partitions) -> None:
    """Put plog's files of ``partitions`` into a stopped broker's ``log_dir`` (the broker's
    ``partition.metadata``, its topic id, is kept) and plog's offsets of them into the log
    dir checkpoints; the broker's clean-shutdown marker stays, so Kafka loads plog's files
    as they are."""
    ours = set(partitions)
    for t, p in ours:
        dest, src = log_dir / f"{t}-{p}", plog_broker_dir / f"{t}-{p}"
        assert (dest / "partition.metadata").exists(), f"the broker did not create {dest}"
        for name in os.listdir(dest):
            if name != "partition.metadata":
                (dest / name).unlink()
        for name in os.listdir(src):
            if name != "partition.metadata":
                (dest / name).write_bytes((src / name).read_bytes())
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint"):
        theirs = {tp: o for tp, o in read_offset_checkpoint(log_dir / name).items() if tp not in ours}
        plog = {tp: o for tp, o in read_offset_checkpoint(plog_broker_dir / name).items() if tp in ours}
        write_offset_checkpoint(log_dir / name, {**theirs, **plog})


@pytest.fixture(scope="session")
def kafka_serving_plog(kafka_fresh, kafka_broker, plog_groups, tmp_path_factory):
    def build(version: str) -> ServedRun:
        fresh = kafka_fresh(version)
        log_dir = copy_log_dir(fresh.template, tmp_path_factory.mktemp(f"front-{version}-served") / "logs")
        offsets_tps = [(OFFSETS_TOPIC, p) for p in plog_groups.offsets_partitions()]
        install_plog_partitions(plog_groups.broker_dir, log_dir, plog_groups.partitions() + offsets_tps)
        broker = kafka_broker(version, log_dir=log_dir, settings=BROKER_SETTINGS)
        try:
            ends = broker.wait_partitions_ready(plog_groups.partitions() + offsets_tps)
            admin = _admin(broker.bootstrap)
            try:
                fetched = _retry("OffsetFetch of plog's groups",
                                 lambda: admin.list_group_offsets(list(plog_groups.final)))
                described = _retry("DescribeGroups of plog's groups",
                                   lambda: admin.describe_groups(list(plog_groups.final)))
            finally:
                admin.close()
            group_offsets = {g: {(tp.topic, tp.partition): om.offset for tp, om in got.items()}
                             for g, got in fetched.items()}
            positions = {g: _group_positions(broker.bootstrap, g, sorted(plog_groups.final[g]))
                         for g in plog_groups.final}
            consumed, _ = consume_all(broker.bootstrap, plog_groups.partitions())
            broker.stop()
        except BaseException:
            broker.kill()
            raise
        return ServedRun(version, log_dir, group_offsets, described, positions,
                         {tp: o for tp, o in ends.items() if tp[0] == PLOG_TOPIC}, consumed)

    return _PerVersion("serving plog's group offsets", build)


def _group_positions(bootstrap: str, group: str, tps) -> dict:
    """Where a kafka-python consumer of ``group`` (assigned, no auto-reset) starts: the
    committed offsets the broker hands it."""
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="none", client_id="plog-front-reader", request_timeout_ms=30000)
    try:
        parts = [TopicPartition(t, p) for t, p in tps]
        consumer.assign(parts)
        return {(tp.topic, tp.partition): _retry(f"position of {group} {tp}", lambda tp=tp: consumer.position(tp))
                for tp in parts}
    finally:
        consumer.close()


# -- 1. keys land where Kafka's clients put them --------------------------------------------------


def test_key_partitions_equal_kafka_clients(kafka_fresh, kafka_version, tmp_path):
    """For each key: the partition the broker acknowledged to kafka-python (murmur2, like
    Java), the partition Kafka's Java producer stored it in, plog's ``Producer`` choice in
    a 7-partition topic and ``partition_for_key`` are one and the same."""
    fresh = kafka_fresh(kafka_version)
    keys = sample_keys()
    assert set(fresh.bootstrap_partitions) == set(keys)
    text_keys = {k for k in keys if _is_text_key(k)}
    assert set(fresh.java_partitions) == text_keys
    assert b"" in text_keys and len(text_keys) > 60

    dd = DataDir.init(tmp_path / "plog", brokers=1)
    dd.create_topic(KEYS_TOPIC, KEY_PARTITIONS, 1)
    with Producer(dd) as producer:
        futures = [(k, producer.send(KEYS_TOPIC, b"plog-%d" % i, key=k)) for i, k in enumerate(keys)]
        plog = {k: f.get().partition for k, f in futures}

    wrong = {k: (plog[k], got) for k, got in fresh.bootstrap_partitions.items() if plog[k] != got}
    assert not wrong, f"plog's partition != the one the broker acknowledged to kafka-python for {len(wrong)} keys: " \
                      f"{dict(list(wrong.items())[:10])}"
    wrong = {k: (plog[k], got) for k, got in fresh.java_partitions.items() if plog[k] != got}
    assert not wrong, f"plog's partition != Kafka's Java producer's for {len(wrong)} keys: " \
                      f"{dict(list(wrong.items())[:10])}"
    assert {k: partition_for_key(k, KEY_PARTITIONS) for k in keys} == plog
    # The keys exercise every partition, so agreement is not a coincidence of a few.
    assert set(plog.values()) == set(range(KEY_PARTITIONS))

    # Each record is where plog said, with its key (read back through plog's consumer).
    consumer = Consumer(dd, auto_offset_reset="earliest")
    try:
        consumer.assign([(KEYS_TOPIC, p) for p in range(KEY_PARTITIONS)])
        seen = {}
        while not consumer.at_end():
            for r in consumer.poll(100):
                seen[r.key] = r.partition
    finally:
        consumer.close()
    assert seen == plog


# -- 2. plog groups describe on a stopped broker's log dir --------------------------------------------


@pytest.fixture(scope="session")
def written_copies(kafka_written, tmp_path_factory):
    done = {}

    def get(version: str) -> tuple[object, Path]:
        if version not in done:
            run = kafka_written(version)
            dest = tmp_path_factory.mktemp(f"front-{version}-written") / "logs"
            done[version] = (run, copy_log_dir(run.log_dir, dest))
        return done[version]

    return get


@pytest.fixture
def written(written_copies, kafka_version):
    return written_copies(kafka_version)


def test_groups_describe_on_kafka_log_dir(written):
    """``plog groups describe GROUP --format json`` on the stopped broker's directory:
    exactly the offsets the group committed (kafka-python's ``committed()``, the broker's
    OffsetFetch answer), the broker's log end offsets, the lag; no member is live."""
    run, log_dir = written
    result = run.result
    assert result.committed and all(o is not None for o in result.committed.values())
    proc = plog_cli("groups", "describe", GROUP_ID, "--data-dir", log_dir, "--format", "json")
    rows = json.loads(_ok(proc))
    got = {(r["topic"], r["partition"]): r["current_offset"] for r in rows}
    assert got == result.committed
    assert len(rows) == len(got)
    for r in rows:
        tp = (r["topic"], r["partition"])
        assert r["group"] == GROUP_ID
        assert r["log_end_offset"] == result.end_offsets[tp], tp
        assert r["lag"] == result.end_offsets[tp] - result.committed[tp], tp
        assert r["consumer_id"] is None and r["host"] is None and r["client_id"] is None, r
    assert b"has no active members" in proc.stderr

    # The group as the coordinator last recorded it: kafka-python's member left, so Empty.
    state = json.loads(_ok(plog_cli("groups", "describe", GROUP_ID, "--state", "--data-dir", log_dir,
                                    "--format", "json")))
    assert [(s["group"], s["state"], s["protocol_type"], s["members"]) for s in state] == \
        [(GROUP_ID, "Empty", "consumer", 0)]
    listed = json.loads(_ok(plog_cli("groups", "list", "--data-dir", log_dir, "--format", "json")))
    assert GROUP_ID in [g["group"] for g in listed]

    # Nothing was written to the broker's directory.
    assert not (log_dir / "groups").exists()




def test_engine_committed_on_kafka_log_dir(written):
    """``GroupCoordinator(DataDir.open(kafka log dir)).committed(group)`` (where plog's
    ``Consumer`` of the group starts) returns the offsets the group committed."""
    run, log_dir = written
    dd = DataDir.open(log_dir)
    assert dd.kafka_log_dir
    got = {(tp.topic, tp.partition): c.offset for tp, c in GroupCoordinator(dd).committed(GROUP_ID).items()}
    assert got == run.result.committed


def test_consume_from_committed_on_kafka_log_dir(written):
    """``plog consume --group G --partition ... --offset committed -e``: the group consumed
    everything, so nothing is left from its committed offsets."""
    run, log_dir = written
    parts = [a for p in range(run.result.topics[MULTI_TOPIC]["partitions"]) for a in ("--partition", p)]
    proc = plog_cli("consume", MULTI_TOPIC, "--group", GROUP_ID, *parts, "--offset", "committed", "-e",
                    "--format", "jsonl", "--data-dir", log_dir)
    assert _ok(proc) == ""
    assert b"consumed 0 record(s)" in proc.stderr


def test_consume_group_on_kafka_log_dir(written):
    """``plog consume TOPIC --group G -e`` on a Kafka log dir reads from the group's
    committed offsets (never committing): nothing is left."""
    run, log_dir = written
    proc = plog_cli("consume", MULTI_TOPIC, "--group", GROUP_ID, "-e", "--format", "jsonl", "--data-dir", log_dir)
    assert _ok(proc) == ""
    assert not (log_dir / "groups").exists()


# -- 3. plog consume on the transactional topic of a stopped broker -------------------------------------


def _consume_jsonl(log_dir: Path, topic: str, isolation: str) -> dict:
    proc = plog_cli("consume", topic, "--data-dir", log_dir, "--isolation-level", isolation, "-e",
                    "--format", "jsonl")
    out = {}
    for line in _ok(proc).splitlines():
        r = json.loads(line)
        assert r["topic"] == topic
        out.setdefault((topic, r["partition"]), []).append(
            (r["offset"], decode_bytes(r["key"]), decode_bytes(r["value"]),
             tuple((h["key"], decode_bytes(h["value"])) for h in r["headers"]), r["timestamp"], r["timestamp_type"]))
    for tp, records in out.items():
        offsets = [r[0] for r in records]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), tp
    return out


def _kafka_python_view(consumed) -> list:
    return [(c.offset, c.key, c.value, tuple(c.headers), c.timestamp, "CreateTime" if c.timestamp_type == 0
             else "LogAppendTime") for c in consumed]


def _manifest_view(sent) -> list:
    return [(s.offset, s.key, s.value, tuple(s.headers), s.timestamp, "CreateTime") for s in sent]


def test_consume_read_committed_on_kafka_log_dir(written):
    """read_committed: exactly the records a kafka-python read_committed consumer got from
    the broker, i.e. the committed transactions and the plain producer's records."""
    run, log_dir = written
    result = run.result
    got = _consume_jsonl(log_dir, TXN_TOPIC, "read_committed")
    partitions = [(TXN_TOPIC, p) for p in range(result.topics[TXN_TOPIC]["partitions"])]
    for tp in partitions:
        want = _kafka_python_view(result.consumed["read_committed"][tp])
        assert got.get(tp, []) == want, tp
        assert want == _manifest_view(s for s in result.sent_to(tp) if s.txn != "aborted"), tp
    assert sum(len(got[tp]) for tp in partitions) == sum(
        1 for s in result.manifest if s.topic == TXN_TOPIC and s.txn != "aborted")
    aborted = {(s.partition, s.offset) for s in result.manifest if s.topic == TXN_TOPIC and s.txn == "aborted"}
    assert aborted and not aborted & {(tp[1], r[0]) for tp in got for r in got[tp]}


def test_consume_read_uncommitted_on_kafka_log_dir(written):
    """read_uncommitted: committed, aborted and plain records (every data record the
    broker served to kafka-python's read_uncommitted consumer)."""
    run, log_dir = written
    result = run.result
    got = _consume_jsonl(log_dir, TXN_TOPIC, "read_uncommitted")
    kinds = set()
    for p in range(result.topics[TXN_TOPIC]["partitions"]):
        tp = (TXN_TOPIC, p)
        want = _kafka_python_view(result.consumed["read_uncommitted"][tp])
        assert got.get(tp, []) == want, tp
        assert want == _manifest_view(result.sent_to(tp)), tp
        kinds |= {s.txn for s in result.sent_to(tp)}
    assert kinds == {None, "committed", "aborted"}


# -- 4. Kafka's DumpLogSegments decodes plog's group commits --------------------------------------------

_DUMP_RECORD = re.compile(r"^\| offset: (\d+) .* key: (\{.*\}) payload: (\{.*\}|null)$")


def _decoded_offsets_records(out: str) -> list[tuple[int, dict, dict | None]]:
    records = []
    for line in out.splitlines():
        if line.startswith("| offset:"):
            m = _DUMP_RECORD.match(line)
            assert m, f"not an --offsets-decoder record line: {line!r}"
            payload = m.group(3)
            records.append((int(m.group(1)), json.loads(m.group(2)),
                            None if payload == "null" else json.loads(payload)))
    return records


def test_dump_log_segments_decodes_plog_group_commits(plog_groups, kafka_version, dump_log_segments):
    segments = []
    for p in plog_groups.offsets_partitions():
        segments += sorted((plog_groups.broker_dir / f"{OFFSETS_TOPIC}-{p}").glob("*.log"))
    assert segments
    assert (plog_groups.broker_dir / f"{OFFSETS_TOPIC}-{partition_for_group(PLOG_GROUP)}"
            / "00000000000000000000.log") in segments
    out, err, code = dump_log_segments(kafka_version, segments, "--offsets-decoder")
    assert code == 0, err
    problems = [line for line in err.splitlines() if line.strip() and not line.startswith(("SLF4J", "log4j"))]
    assert not problems, problems
    records = _decoded_offsets_records(out)
    assert records

    commits: dict[str, list] = {}
    metadata = []
    for _offset, key, payload in records:
        kind, data = key["type"], key["data"]
        if kind == "1":
            assert payload is not None and set(payload["data"]) >= {"offset", "metadata", "commitTimestamp"}
            assert payload["data"]["metadata"] == ""
            commits.setdefault(data["group"], []).append((data["topic"], data["partition"], payload["data"]["offset"]))
        else:
            assert kind == "2", f"unexpected record type in plog's __consumer_offsets: {key}"
            metadata.append((data["group"], payload))
    want = {g: [(t, p, o) for done in seq for (t, p), o in sorted(done.items())]
            for g, seq in plog_groups.commits.items()}
    assert commits == want

    # The GroupMetadata of the subscribed member's group, as Kafka decodes it.
    mine = [payload for group, payload in metadata if group == PLOG_GROUP]
    assert mine, f"no GroupMetadata record for {PLOG_GROUP}"
    # The member left at close: the last record is the Empty group, as Kafka's coordinator writes it.
    empty = mine[-1]["data"]
    assert (empty["protocolType"], empty["protocol"], empty["leader"], empty["members"]) == ("consumer", None, None, [])
    value = mine[-2]["data"]
    assert empty["generation"] > value["generation"]
    assert value["protocolType"] == "consumer"
    assert value["generation"] >= 1
    assert value["protocol"] == "range"
    assert value["leader"] == plog_groups.member_id
    (member,) = value["members"]
    assert member["memberId"] == plog_groups.member_id
    assert member["clientId"] == plog_groups.client_id
    assert member["groupInstanceId"] is None
    assert member["sessionTimeout"] > 0 and member["rebalanceTimeout"] > 0
    assert member["subscription"]["topics"] == [PLOG_TOPIC]
    assert member["assignment"]["assignedPartitions"] == [{"topic": PLOG_TOPIC,
                                                          "partitions": list(range(PLOG_TOPIC_PARTITIONS))}]
    assert all(group == PLOG_GROUP for group, _ in metadata), "the standalone consumer has no group metadata"

    # plog's own dump prints what Kafka's tool printed.
    proc = plog_cli("dump", "--kafka-version", major(kafka_version), "--files", ",".join(map(str, segments)),
                    "--offsets-decoder")
    assert _ok(proc) == out


# -- 5. a broker serves the offsets plog committed -------------------------------------------------------


def test_broker_serves_plog_group_offsets(kafka_serving_plog, kafka_version, plog_groups):
    """A broker handed plog's ``__consumer_offsets`` folders loads the groups: OffsetFetch
    returns exactly plog's commits, and a consumer of the group starts at them."""
    served = kafka_serving_plog(kafka_version)
    assert served.group_offsets == plog_groups.final
    assert served.positions == plog_groups.final
    assert served.end_offsets == plog_groups.end_offsets
    for tp, records in served.consumed.items():
        assert [r.offset for r in records] == list(range(plog_groups.end_offsets[tp])), tp
    described = served.group_descriptions[PLOG_GROUP]
    assert described["error"] is None, described
    # plog's consumer left at close: Kafka loads the Empty group plog recorded last.
    assert (described["group_state"], described["protocol_type"], described["protocol_data"],
            described["members"]) == ("Empty", "consumer", "", []), described
    for m in described["members"]:
        assert (m["member_id"], m["client_id"]) == (plog_groups.member_id, plog_groups.client_id), m
        assert m["member_metadata"]["topics"] == [PLOG_TOPIC], m
        assert m["member_assignment"]["assigned_partitions"] == [
            {"topic": PLOG_TOPIC, "partitions": list(range(PLOG_TOPIC_PARTITIONS))}], m
    standalone = served.group_descriptions[PLOG_STANDALONE]
    assert (standalone["error"], standalone["group_state"], standalone["members"]) == (None, "Empty", []), standalone


def test_closed_plog_group_is_empty_for_kafka(kafka_serving_plog, kafka_version, plog_groups):
    """plog's consumer closed (left the group): plog's data directory says Empty, and so
    must what it wrote to ``__consumer_offsets``: for the broker handed the folder and for
    plog reading the broker directory as a Kafka log dir."""
    live = json.loads(_ok(plog_cli("groups", "describe", PLOG_GROUP, "--state", "--format", "json",
                                   "--data-dir", plog_groups.data_dir)))
    assert [(s["state"], s["members"]) for s in live] == [("Empty", 0)]
    recorded = json.loads(_ok(plog_cli("groups", "describe", PLOG_GROUP, "--state", "--format", "json",
                                       "--data-dir", plog_groups.broker_dir)))
    served = kafka_serving_plog(kafka_version)
    described = served.group_descriptions[PLOG_GROUP]
    assert ((described["group_state"], described["members"]),
            [(s["state"], s["members"]) for s in recorded]) == (("Empty", []), [("Empty", 0)])
