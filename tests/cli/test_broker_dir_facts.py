"""Real broker directories read right (issue 21, item 4): on every Kafka log directory of the
corpus, ``ls``, ``topics list``, ``topics describe``, ``lookup``, ``consume``, ``scan`` and
``groups describe`` agree with the files on each partition's topic id, configs (and where they
come from), leader epoch, log start offset, log end offset and high watermark.

The expected values are computed here from the files themselves, with nothing of plog's
engine but the byte-level batch reader and metadata-record decoder: the checkpoint files are
parsed as text, ``partition.metadata`` as text, and the KRaft metadata log is replayed with
Kafka's ``PartitionRegistration.merge`` rule (a ``PartitionChangeRecord`` whose leader is not
-2 starts a new leader epoch).
"""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import CORPUS
from plog.cli.main import app
from plog.engine.errors import UnknownTopicOrPartitionError
from plog.engine.storage.file_records import FileBatches
from plog.formats.cluster_metadata import decode_metadata_value

runner = CliRunner()
ARTHUR = CORPUS / "ArthurArutunyan04__Backend_labs" / "kafka-data"
ZK_BROKER_2 = CORPUS / "dipendrasaini__kafka-learnning-series" / "tmp" / "kafka-logs-2"
FOLDER = re.compile(r"(.+)-(\d+)")


def corpus_log_dirs() -> list[Path]:
    """Every directory of the corpus holding a meta.properties (one per broker)."""
    if not CORPUS.is_dir():
        return []
    return sorted(Path(root) for root, _dirs, files in os.walk(CORPUS) if "meta.properties" in files)


def plog(*args, env=None) -> tuple[int, str, str]:
    r = runner.invoke(app, [str(a) for a in args], catch_exceptions=False, env=env)
    return r.exit_code, r.stdout, r.stderr


def ok_json(*args):
    code, out, err = plog(*args)
    assert code == 0, err
    return json.loads(out)


# -- the facts, from the files -----------------------------------------------------------


def offsets_checkpoint(log_dir: Path, name: str) -> dict[tuple[str, int], int]:
    path = log_dir / name
    if not path.is_file():
        return {}
    lines = path.read_text().splitlines()
    out = {}
    for line in lines[2:2 + int(lines[1])]:
        topic, partition, offset = line.split(" ")
        out[(topic, int(partition))] = int(offset)
    return out


def epochs(folder: Path) -> list[tuple[int, int]]:
    path = folder / "leader-epoch-checkpoint"
    if not path.is_file():
        return []
    lines = path.read_text().splitlines()
    return [tuple(int(x) for x in line.split(" ")) for line in lines[2:2 + int(lines[1])]]


def topic_id(folder: Path) -> str | None:
    path = folder / "partition.metadata"
    if not path.is_file():
        return None
    fields = dict(line.split(": ", 1) for line in path.read_text().splitlines() if ": " in line)
    return fields["topic_id"]


def b64(u) -> str:
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def segment_logs(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if re.fullmatch(r"\d{20}\.log", p.name))


def log_end(folder: Path) -> int | None:
    logs = segment_logs(folder)
    if not logs:
        return None
    end = int(logs[-1].name[:20])
    for batch in FileBatches(logs[-1]):
        end = batch.next_offset
    return end


def first_record(folder: Path, start: int) -> int | None:
    """The first non-control record at or after ``start`` (what a consumer reads first)."""
    for log in segment_logs(folder):
        for batch in FileBatches(log):
            if batch.last_offset < start or getattr(batch, "is_control", False):
                continue
            for record in batch.records():
                if record.offset >= start:
                    return record.offset
    return None


def replay_metadata_log(log_dir: Path) -> dict:
    """Topic ids, topic configs and partition registrations of ``__cluster_metadata-0``."""
    part = log_dir / "__cluster_metadata-0"
    image = {"ids": {}, "configs": {}, "partitions": {}}
    if not part.is_dir():
        return image
    names = sorted(os.listdir(part))
    snapshots = sorted((n for n in names if n.endswith(".checkpoint")), key=lambda n: int(n[:20]))
    start = int(snapshots[-1][:20]) if snapshots else 0
    files = ([part / snapshots[-1]] if snapshots else []) + [part / n for n in names if n.endswith(".log")]
    by_id = {}
    for path in files:
        for batch in FileBatches(path):
            if getattr(batch, "is_control", False):
                continue
            for record in batch.records():
                if path.suffix == ".log" and record.offset < start:
                    continue
                m = decode_metadata_value(record.value)
                f = m.fields
                if m.type == "TOPIC_RECORD":
                    by_id[f["topicId"]] = f["name"]
                    image["ids"][f["name"]] = b64(f["topicId"])
                elif m.type == "CONFIG_RECORD" and f["resourceType"] == 2:
                    configs = image["configs"].setdefault(f["resourceName"], {})
                    if f["value"] is None:
                        configs.pop(f["name"], None)
                    else:
                        configs[f["name"]] = f["value"]
                elif m.type == "PARTITION_RECORD":
                    image["partitions"][(by_id[f["topicId"]], f["partitionId"])] = {
                        "leader": f["leader"], "epoch": f["leaderEpoch"], "replicas": f["replicas"], "isr": f["isr"]}
                elif m.type == "PARTITION_CHANGE_RECORD":
                    reg = image["partitions"][(by_id[f["topicId"]], f["partitionId"])]
                    if f["isr"] is not None:
                        reg["isr"] = f["isr"]
                    if f["replicas"] is not None:
                        reg["replicas"] = f["replicas"]
                    if f["leader"] != -2:
                        reg["leader"], reg["epoch"] = f["leader"], reg["epoch"] + 1
                elif m.type == "REMOVE_TOPIC_RECORD":
                    name = by_id.pop(f["topicId"])
                    image["ids"].pop(name)
                    image["configs"].pop(name, None)
                    image["partitions"] = {k: v for k, v in image["partitions"].items() if k[0] != name}
    return image


def folders(log_dir: Path) -> dict[tuple[str, int], Path]:
    out = {}
    for p in sorted(log_dir.iterdir()):
        m = FOLDER.fullmatch(p.name)
        if p.is_dir() and m and m.group(1) != "__cluster_metadata":
            out[(m.group(1), int(m.group(2)))] = p
    return out


# -- every command against them ----------------------------------------------------------


@pytest.mark.parametrize("log_dir", corpus_log_dirs(), ids=lambda p: str(p.relative_to(CORPUS)))
def test_every_command_reads_the_files_facts(corpus, log_dir):
    held = folders(log_dir)
    image = replay_metadata_log(log_dir)
    log_starts = offsets_checkpoint(log_dir, "log-start-offset-checkpoint")
    hws = offsets_checkpoint(log_dir, "replication-offset-checkpoint")
    facts = {}
    for tp, folder in held.items():
        logs = segment_logs(folder)
        first = int(logs[0].name[:20]) if logs else None
        start = None if first is None else max(first, log_starts.get(tp, first))
        facts[tp] = {"topic_id": topic_id(folder), "epochs": epochs(folder), "log_start": start,
                     "log_end": log_end(folder), "hw": hws.get(tp)}

    # ls
    (d,) = ok_json("ls", log_dir, "--format", "json")
    seen = {(p["topic"], p["partition"]): p for p in d["partitions"] if p["topic"] != "__cluster_metadata"}
    assert set(seen) == set(held)
    for tp, f in facts.items():
        p = seen[tp]
        assert p["topic_id"] == f["topic_id"], tp
        assert p["leader_epoch"] == (f["epochs"][-1][0] if f["epochs"] else None), tp
        assert (p["log_start_offset"], p["log_end_offset"], p["high_watermark"]) == \
            (f["log_start"], f["log_end"], f["hw"]), tp

    # topics list: ids and configs from the metadata log when it names the topic, else from the
    # folders (ids) and nowhere (configs: unknown, not empty)
    topics = {t for t, _ in held} | set(image["ids"])
    code, out, err = plog("topics", "list", "--internal", "--format", "json", "-d", log_dir)
    assert code == 0, err
    rows = {r["topic"]: r for r in json.loads(out)}
    assert set(rows) == topics
    for name, row in rows.items():
        ids = {f["topic_id"] for tp, f in facts.items() if tp[0] == name and f["topic_id"]}
        if name in image["ids"]:
            assert ids <= {image["ids"][name]}, name  # partition.metadata agrees with the controller
            assert (row["topic_id"], row["configs"], row["source"]) == \
                (image["ids"][name], image["configs"].get(name, {}), "metadata log"), name
        else:
            assert (row["topic_id"], row["configs"], row["replication_factor"], row["source"]) == \
                (min(ids) if ids else None, None, None, "partition folders"), name
            assert len(ids) <= 1
    assert ("metadata log" if image["ids"] else "ZooKeeper") in err

    # topics describe: the controller's last leader, epoch, replicas and ISR when the metadata
    # log has them, else this replica's latest epoch; offsets are this broker's replica's
    names = sorted({t for t, _ in held})
    described = {(r["topic"], r["partition"]): r
                 for r in ok_json("topics", "describe", *names, "--format", "json", "-d", log_dir)}
    for tp, f in facts.items():
        row = described[tp]
        reg = image["partitions"].get(tp)
        local_epoch = f["epochs"][-1][0] if f["epochs"] else None
        if reg is not None:
            assert (row["leader"], row["leader_epoch"], row["replicas"], row["isr"], row["source"]) == \
                (None if reg["leader"] < 0 else reg["leader"], reg["epoch"], reg["replicas"], reg["isr"],
                 "metadata log"), tp
        else:
            assert (row["leader"], row["leader_epoch"], row["isr"], row["source"]) == \
                (None, 0 if local_epoch is None else local_epoch, None, "partition folders"), tp
        (here,) = [r for r in row["replicas_state"] if r["folder"]]
        assert here["leader_epoch"] == local_epoch, tp
        assert (row["log_start_offset"], row["log_end_offset"], row["high_watermark"]) == \
            (f["log_start"], f["log_end"], f["hw"]), tp

    for tp, f in facts.items():
        if f["log_start"] is None:
            continue
        # lookup: ListOffsets earliest and latest
        earliest = ok_json("lookup", held[tp], "-t", "earliest", "-f", "json")
        latest = ok_json("lookup", held[tp], "-t", "latest", "-f", "json")
        assert (earliest["offset"], earliest["log_start_offset"]) == (f["log_start"], f["log_start"]), tp
        assert (latest["offset"], latest["log_end_offset"]) == (f["log_end"], f["log_end"]), tp
        assert latest["leader_epoch"] == (f["epochs"][-1][0] if f["epochs"] else None), tp
        # consume: the first record is the first at or after the log start
        code, out, err = plog("consume", tp[0], "-p", tp[1], "-o", "earliest", "-c", "1", "-e", "-q",
                              "-f", "%o\n", "-d", log_dir)
        assert code == 0, err
        expected = first_record(held[tp], f["log_start"])
        assert out == ("" if expected is None else f"{expected}\n"), tp

    # consume of a whole topic reads the partitions this directory holds
    for name in names:
        code, out, err = plog("consume", name, "-e", "-q", "-f", "%p\n", "-d", log_dir)
        assert code == 0, err
        assert {int(p) for p in out.split()} <= {p for t, p in held if t == name}

    # scan: every record on disk (as ls counts them, those below a checkpointed log start
    # too: a Streams repartition topic's DeleteRecords leaves them until the segment goes), all
    # below the log end
    for row in ok_json("scan", log_dir, "-j", "1", "--format", "json"):
        tp = (row["topic"], row["partition"])
        if tp in facts and row["records"]:
            assert row["records"] == seen[tp]["records"], tp
            assert row["first_offset"] <= row["last_offset"] < facts[tp]["log_end"], tp

    # groups: the log end offsets of a group's partitions
    for group in ok_json("groups", "list", "--format", "json", "-d", log_dir):
        for row in ok_json("groups", "describe", group["group"], "--format", "json", "-d", log_dir):
            tp = (row["topic"], row["partition"])
            if tp in facts:
                assert row["log_end_offset"] == facts[tp]["log_end"], (group, tp)


def test_the_numbers_of_the_issue(corpus):
    """oms_order_created-1 of a KRaft broker stopped cleanly: its replica is at leader epoch 14
    (leader-epoch-checkpoint), its log starts at 81908 (retention deleted the segments below),
    its topic id is 0CM0rYlfQiqSTCH-x54Zhw and its configs are in the metadata log. The
    controller's last record (offset 7260, at the broker's shutdown) took the leadership away:
    leader none at epoch 15, an epoch in which nothing was written."""
    (row,) = [r for r in ok_json("topics", "list", "--format", "json", "-d", ARTHUR) if r["topic"] == "oms_order_created"]
    assert row == {"topic": "oms_order_created", "topic_id": "0CM0rYlfQiqSTCH-x54Zhw", "partitions": 5,
                   "replication_factor": 1, "configs": {"cleanup.policy": "delete", "retention.ms": "86400000"},
                   "source": "metadata log"}
    rows = ok_json("topics", "describe", "oms_order_created", "--format", "json", "-d", ARTHUR)
    one = rows[1]
    assert (one["leader"], one["leader_epoch"], one["replicas"], one["isr"], one["log_start_offset"],
            one["log_end_offset"], one["high_watermark"], one["status"]) == \
        (None, 15, [1], [1], 81908, 94646, 94646, "offline,under-min-isr")
    assert [(r["broker"], r["state"], r["in_sync"], r["leader_epoch"]) for r in one["replicas_state"]] == \
        [(1, "stopped", True, 14)]
    assert [r["replicas_state"][0]["leader_epoch"] for r in rows] == [14] * 5
    (d,) = ok_json("ls", ARTHUR / "oms_order_created-1", "--format", "json")
    (p,) = d["partitions"]
    assert (p["leader_epoch"], p["log_start_offset"], p["topic_id"]) == (14, 81908, "0CM0rYlfQiqSTCH-x54Zhw")
    code, out, err = plog("topics", "describe", "oms_order_created", "-d", ARTHUR)
    assert code == 0
    assert out.splitlines()[2].split() == ["oms_order_created", "1", "none", "15", "1", "1", "94646", "81908",
                                           "94646", "3098017", "1", "offline,under-min-isr"]
    assert err == (f"{ARTHUR} is a Kafka log directory: topic ids, configs, leaders, leader epochs, replicas and "
                   f"ISRs as last recorded in its metadata log ({ARTHUR}/__cluster_metadata-0, up to offset 7319); "
                   "offsets from the partition folders\n")


def test_a_zookeeper_era_directory_says_what_it_does_not_hold(corpus):
    """No metadata log: configs, leaders and ISRs are in ZooKeeper. They show as unknown, never
    as empty configs or as this broker leading with itself as the only in-sync replica."""
    code, out, err = plog("topics", "list", "-d", ZK_BROKER_2)
    assert code == 0
    assert out.splitlines() == ["TOPIC    PARTITIONS  RF  CONFIGS", "invoice           5   -  -"]
    assert "ZooKeeper-era Kafka log directory: topic configs, leaders, replicas and ISRs are kept in ZooKeeper" in err
    (row,) = ok_json("topics", "list", "--format", "json", "-d", ZK_BROKER_2)
    assert row == {"topic": "invoice", "topic_id": "bQyJ_ZYaSA6dEv8UbXmzWA", "partitions": 5,
                   "replication_factor": None, "configs": None, "source": "partition folders"}
    code, out, err = plog("topics", "describe", "invoice", "-d", ZK_BROKER_2)
    assert out.splitlines()[1].split() == ["invoice", "0", "-", "0", "2", "-", "100294", "0", "100294", "3297969",
                                           "4"]
    code, out, err = plog("topics", "describe", "invoice", "-d", ZK_BROKER_2, env={"PLOG_QUIET": "1"})
    assert (code, err) == (0, "")


def test_consume_of_a_topic_reads_the_partitions_this_broker_holds(corpus):
    """The metadata log names all 50 __consumer_offsets partitions; this broker holds 19."""
    code, out, err = plog("consume", "__consumer_offsets", "-e", "-f", "%p %o\n", "-d", ARTHUR)
    assert code == 0, err
    assert out.split("\n")[0] == "19 186795" and len(out.splitlines()) == 7
    with pytest.raises(UnknownTopicOrPartitionError, match=f"^{ARTHUR} holds no folder for __consumer_offsets-3 "
                       r"\(this broker has no replica of it\)$"):
        plog("consume", "__consumer_offsets", "-p", "3", "-e", "-d", ARTHUR)


def test_a_plog_data_directory_reads_the_same_way(tmp_path):
    """plog's own data directory: topics list and describe show the topic id as ls (and Kafka)
    does, and every replica's leader epoch, log start and high watermark as ls reads them."""
    d = tmp_path / "data"
    assert plog("init", "--brokers", "2", "-d", d)[0] == 0
    assert plog("topics", "create", "t", "-p", "2", "-r", "2", "-d", d)[0] == 0
    assert runner.invoke(app, ["produce", "t", "-d", str(d)], input="a\nb\nc\n").exit_code == 0
    (row,) = ok_json("topics", "list", "--format", "json", "-d", d)
    described = ok_json("topics", "describe", "t", "--format", "json", "-d", d)
    listed = {}
    for broker in (1, 2):
        (ls,) = ok_json("ls", d / f"broker-{broker}", "--format", "json")
        for p in ls["partitions"]:
            listed[(p["partition"], broker)] = p
    assert {p["topic_id"] for p in listed.values()} == {row["topic_id"]}
    assert len(row["topic_id"]) == 22 and row["source"] == "cluster.json"
    for x in described:
        assert x["source"] == "cluster.json"
        for r in x["replicas_state"]:
            p = listed[(x["partition"], r["broker"])]
            assert (r["leader_epoch"], r["log_end_offset"], r["high_watermark"]) == \
                (p["leader_epoch"], p["log_end_offset"], p["high_watermark"])
        leader = listed[(x["partition"], x["leader"])]
        assert (x["log_start_offset"], x["high_watermark"]) == (leader["log_start_offset"], leader["high_watermark"])
