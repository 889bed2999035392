"""``plog brokers list|stop|start``, ``plog topics describe`` (controller view and Kafka's
problem filters), ``plog assign preferred-leaders`` (the election) and ``plog produce --acks``
through the real entry point, on 3-broker data directories: failover, offline partitions,
catch-up with truncation, min.insync.replicas, crashes and fencing."""

from __future__ import annotations

import csv
import io
import json

import pytest

from cli_run import plog


class Cluster:
    """A data directory under tmp_path driven through the CLI."""

    def __init__(self, tmp_path, capsys, *init_args):
        self.path = tmp_path / "data"
        self.capsys = capsys
        self.inputs = tmp_path
        self.n = 0
        self.ok("init", "--brokers", "3", *init_args)

    def run(self, *args):
        return plog(self.capsys, *args, "-d", str(self.path))

    def ok(self, *args) -> str:
        code, out, err = self.run(*args)
        assert code == 0, (args, out, err)
        return out

    def json(self, *args):
        return json.loads(self.ok(*args, "--format", "json"))

    def describe(self, *args) -> dict[tuple[str, int], dict]:
        return {(r["topic"], r["partition"]): r for r in self.json("topics", "describe", *args)}

    def brokers(self) -> dict[int, dict]:
        return {r["id"]: r for r in self.json("brokers", "list")}

    def produce(self, topic, lines, *args):
        self.n += 1
        f = self.inputs / f"in{self.n}.txt"
        f.write_text("".join(f"{x}\n" for x in lines))
        return self.run("produce", topic, "-F", str(f), *args)

    def values(self, topic) -> list[str]:
        out = self.ok("consume", topic, "-e", "-q", "--format", "jsonl")
        return sorted(json.loads(x)["value"] for x in out.splitlines())


@pytest.fixture
def cluster(tmp_path, capsys):
    return Cluster(tmp_path, capsys)


def _keyed(prefix, n):
    return [f"k{i}:{prefix}{i}" for i in range(n)]


def _error_line(err: str) -> str:
    """The error of a failed run: its last stderr line, and no traceback anywhere."""
    assert "Traceback" not in err
    line = err.splitlines()[-1]
    assert line.startswith("plog: error: ")
    return line


def test_stop_moves_leadership_and_start_catches_up(cluster):
    c = cluster
    c.ok("topics", "create", "t", "--partitions", "3", "--replication-factor", "3")
    assert c.produce("t", _keyed("a", 60), "--key-separator", ":")[0] == 0
    brokers = c.brokers()
    assert sorted(brokers) == [1, 2, 3]
    assert all((b["state"], b["fenced"], b["since"], b["replicas"], b["in_sync"]) == ("running", False, "", 3, 3)
               for b in brokers.values())
    assert sum(b["leaders"] for b in brokers.values()) == 3
    assert brokers[2]["log_dir"] == str(c.path / "broker-2")
    table = c.ok("brokers", "list").splitlines()
    assert table[0].split() == ["ID", "RACK", "STATE", "FENCED", "SINCE", "LEADERS", "REPLICAS", "IN_SYNC", "LOG_DIR"]
    assert len(table) == 4 and all(" running " in line for line in table[1:])
    rows = list(csv.DictReader(io.StringIO(c.ok("brokers", "list", "--format", "csv"))))
    assert [r["state"] for r in rows] == ["running"] * 3

    before = c.describe()
    assert all(r["leader"] == r["replicas"][0] and r["leader_epoch"] == 0 and r["status"] == ""
               and r["high_watermark"] == r["log_end_offset"] for r in before.values())
    victim = before[("t", 0)]["leader"]
    others = sorted({1, 2, 3} - {victim})
    # A topic the victim holds no replica of stays healthy.
    c.ok("topics", "create", "pair", "--replica-assignment", f"{others[0]}:{others[1]}")

    code, out, err = c.run("brokers", "stop", str(victim))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"broker {victim}: stopped (controlled shutdown)"
    led = sorted(tp for tp, r in before.items() if r["leader"] == victim)
    assert led == [("t", 0)]  # 3 partitions over 3 brokers: one each
    new_leader = [b for b in before[("t", 0)]["replicas"] if b != victim][0]
    isr = [b for b in before[("t", 0)]["isr"] if b != victim]
    assert (f"t-0: leader {victim} -> {new_leader}, epoch 1, ISR {_ids(isr)} (broker {victim} stopped)") in lines
    for p in (1, 2):
        old = before[("t", p)]["isr"]
        assert f"t-{p}: ISR {_ids(old)} -> {_ids([b for b in old if b != victim])} (broker {victim} stopped)" in lines
    assert len(lines) == 4
    assert "no partition is offline" in err

    after = c.describe()
    r = after[("t", 0)]
    assert (r["leader"], r["leader_epoch"], r["isr"], r["status"]) == (new_leader, 1, isr, "under-replicated")
    assert r["under_replicated"] and not r["offline"] and not r["under_min_isr"]
    states = {s["broker"]: s for s in r["replicas_state"]}
    assert states[victim]["state"] == "stopped" and not states[victim]["in_sync"] and states[victim]["folder"]
    for p in (1, 2):
        assert after[("t", p)]["leader"] == before[("t", p)]["leader"] and after[("t", p)]["leader_epoch"] == 0
        assert victim not in after[("t", p)]["isr"]
    assert after[("pair", 0)]["status"] == "" and after[("pair", 0)]["isr"] == others

    under = c.describe("--under-replicated-partitions")
    assert sorted(under) == [("t", 0), ("t", 1), ("t", 2)]
    assert c.json("topics", "describe", "--unavailable-partitions") == []
    table = c.ok("topics", "describe", "t").splitlines()
    assert table[0].split() == ["TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "HW", "START", "END",
                                "SIZE", "SEGMENTS", "STATUS"]
    assert all(line.endswith("under-replicated") for line in table[1:])

    # Stopping it again changes nothing.
    code, out, err = c.run("brokers", "stop", str(victim))
    assert (code, out, err) == (0, "", f"broker {victim} is already stopped\n")
    b = c.brokers()[victim]
    assert (b["state"], b["fenced"], b["leaders"], b["replicas"], b["in_sync"]) == ("stopped", True, 0, 3, 0)
    assert b["since"].endswith("Z") and b["since_ms"] > 0

    # Acknowledged writes while it is down, then it comes back and catches up.
    assert c.produce("t", _keyed("b", 30), "--key-separator", ":")[0] == 0
    code, out, err = c.run("brokers", "start", str(victim))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"broker {victim}: started"
    fetched = [line for line in lines if " on broker " in line]
    assert len(fetched) == 3 and all(": fetched " in line and " bytes, offsets " in line for line in fetched)
    assert sum(f"(replica(s) [{victim}] caught up)" in line for line in lines) == 3
    assert "bytes fetched" in err.splitlines()[-1]
    final = c.describe("t")
    for (_, p), r in final.items():
        assert sorted(r["isr"]) == [1, 2, 3] and r["status"] == ""
        assert {s["log_end_offset"] for s in r["replicas_state"]} == {r["log_end_offset"]}
        assert {s["high_watermark"] for s in r["replicas_state"]} == {r["high_watermark"]} == {r["log_end_offset"]}
    assert sum(r["log_end_offset"] for r in final.values()) == 90
    assert c.values("t") == sorted(_keyed_values("a", 60) + _keyed_values("b", 30))

    # The preferred leader is back in the ISR: a dry run shows the election, changes nothing.
    metadata = (c.path / "cluster.json").read_bytes()
    rows = c.json("assign", "preferred-leaders", "--dry-run")
    assert (c.path / "cluster.json").read_bytes() == metadata
    by_tp = {(x["topic"], x["partition"]): x for x in rows}
    assert by_tp[("t", 0)]["status"] == f"Would elect {victim} (leader now {new_leader})"
    assert by_tp[("t", 0)]["leader"] == new_leader and not by_tp[("t", 0)]["elected"]
    assert by_tp[("t", 1)]["status"] == by_tp[("pair", 0)]["status"] == "Valid replica already elected"
    assert c.describe("t")[("t", 0)]["leader"] == new_leader

    code, out, err = c.run("assign", "preferred-leaders", "--topic", "t", "--format", "json")
    assert code == 0, err
    rows = {x["partition"]: x for x in json.loads(out)}
    assert rows[0]["status"] == f"Elected {victim} (leader was {new_leader}), epoch 2" and rows[0]["elected"]
    assert rows[0]["leader"] == victim and rows[1]["status"] == "Valid replica already elected"
    assert "Successfully completed leader election (PREFERRED) for partitions t-0" in err
    r = c.describe("t")[("t", 0)]
    assert (r["leader"], r["leader_epoch"]) == (victim, 2)
    assert c.values("t") == sorted(_keyed_values("a", 60) + _keyed_values("b", 30))


def _ids(ids) -> str:
    return "[" + ",".join(map(str, ids)) + "]"


def _keyed_values(prefix, n):
    return [f"{prefix}{i}" for i in range(n)]


def test_stop_and_start_count_what_happened_to_a_topic_with_many_partitions(cluster):
    """issue 21, item 10: a broker with a replica of each of the 50 __consumer_offsets
    partitions: stop and start print one line of counts for that topic (they printed a line
    per partition: 54 and ~110 lines), the events of a small topic as before, every event
    with --verbose; --format json has every event either way."""
    c = cluster
    c.ok("topics", "create", "t", "--partitions", "3", "--replication-factor", "3")
    assert c.produce("t", range(30))[0] == 0
    c.ok("consume", "t", "-g", "readers", "-e", "-q")  # creates __consumer_offsets: 50 partitions, RF 3
    offsets_leaders = sum(r["leader"] == 2 for r in c.describe("__consumer_offsets").values())
    t_leaders = sum(r["leader"] == 2 for r in c.describe("t").values())
    assert 0 < offsets_leaders < 50

    code, out, err = c.run("brokers", "stop", "2")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "broker 2: stopped (controlled shutdown)"
    assert lines[1] == (f"__consumer_offsets: 50 partitions: {offsets_leaders} leader elections, "
                        f"{50 - offsets_leaders} ISR changes (--verbose lists them)")
    assert len(lines) == 5 and all(line.startswith("t-") for line in lines[2:])
    assert sum(": leader 2 -> " in line for line in lines[2:]) == t_leaders
    elections = offsets_leaders + t_leaders
    assert err == (f"broker 2 stopped: {elections} leader election(s), {53 - elections} ISR change(s); "
                   "no partition is offline\n")

    code, out, err = c.run("brokers", "start", "2")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:2] == ["broker 2: started",
                         "__consumer_offsets: 50 partitions: 50 replicas caught up (0 bytes fetched), 50 ISR changes "
                         "(--verbose lists them)"]
    assert len(lines) == 8 and all(line.startswith("t-") for line in lines[2:])  # 3 catch-ups, 3 ISR changes

    # --verbose: a line per event and replica, as --format json has them.
    c.ok("brokers", "stop", "2")
    code, out, _ = c.run("brokers", "start", "2", "--verbose")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 1 + 53 + 53
    assert sum(line.startswith("__consumer_offsets-") and " on broker 2: " in line for line in lines) == 50
    c.ok("brokers", "stop", "2")
    doc = c.json("brokers", "start", "2")
    assert len(doc["catch_ups"]) == 53 and len(doc["isr_events"]) == 53
    verbose_stop = c.ok("brokers", "stop", "2", "-v").splitlines()
    assert len(verbose_stop) == 1 + 53 and verbose_stop[0] == "broker 2: stopped (controlled shutdown)"


def test_every_isr_member_stopped_takes_the_partition_offline(cluster):
    c = cluster
    c.ok("topics", "create", "t", "--replication-factor", "3")
    assert c.produce("t", range(10))[0] == 0
    order = [b for b in c.describe()[("t", 0)]["replicas"]]
    c.ok("brokers", "stop", str(order[1]))
    c.ok("brokers", "stop", str(order[2]))
    last = order[0]
    assert c.describe()[("t", 0)]["isr"] == [last]
    doc = c.json("brokers", "stop", str(last))
    assert (doc["broker"], doc["action"], doc["offline"]) == (last, "stop", ["t-0"])
    (event,) = [e for e in doc["events"] if e["kind"] == "leader"]
    assert (event["leader"], event["previous_leader"], event["isr"]) == (-1, last, [last])
    assert "none (offline)" in event["message"]

    r = c.describe()[("t", 0)]
    assert r["leader"] is None and r["offline"] and r["status"] == "offline,under-replicated,under-min-isr"
    assert r["isr"] == [last]  # the last member stays: only it may lead again (KRaft)
    assert [s["state"] for s in r["replicas_state"]] == ["stopped"] * 3
    assert [s["log_end_offset"] for s in r["replicas_state"]] == [10] * 3
    line = c.ok("topics", "describe", "t").splitlines()[1].split()
    assert line[2] == "none" and line[-1] == "offline,under-replicated,under-min-isr"
    assert sorted(c.describe("--unavailable-partitions")) == [("t", 0)]
    assert sorted(c.describe("--under-min-isr-partitions")) == [("t", 0)]  # no leader counts, as in Kafka
    rows = list(csv.DictReader(io.StringIO(c.ok("topics", "describe", "--format", "csv"))))
    assert rows[0]["leader"] == "" and rows[0]["status"] == "offline,under-replicated,under-min-isr"

    code, out, err = c.run("brokers", "list", "--format", "jsonl")
    assert code == 0 and [json.loads(x)["state"] for x in out.splitlines()] == ["stopped"] * 3

    code, out, err = c.produce("t", ["lost"])
    assert code == 1 and out == ""
    assert "t-0 has no leader" in _error_line(err)

    # A replica outside the ISR does not bring it back...
    code, out, err = c.run("brokers", "start", str(order[1]))
    assert code == 0 and out == f"broker {order[1]}: started\n" and "offline partitions: t-0" in err
    assert c.describe()[("t", 0)]["offline"]
    # ...the last ISR member does, and its running followers catch up.
    code, out, err = c.run("brokers", "start", str(last))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:2] == [f"broker {last}: started", f"t-0: leader none -> {last}, epoch 2, ISR [{last}] "
                                                    f"(broker {last} started)"]
    assert f"t-0 on broker {order[1]}: already caught up" in lines
    assert f"t-0: ISR [{last}] -> {_ids([last, order[1]])} (replica(s) [{order[1]}] caught up)" in lines
    assert c.produce("t", range(10, 15))[0] == 0
    doc = c.json("brokers", "start", str(order[2]))
    (catch_up,) = doc["catch_ups"]
    assert (catch_up["broker"], catch_up["records_from"], catch_up["records_to"]) == (order[2], 10, 14)
    assert catch_up["bytes"] == doc["bytes"] > 0 and catch_up["truncation"]["removed"] == 0
    assert [e["isr"] for e in doc["isr_events"]] == [order]
    assert doc["events"][0]["message"] == f"broker {order[2]}: started" and doc["offline"] == []
    r = c.describe()[("t", 0)]
    assert (r["leader"], r["isr"], r["status"]) == (last, order, "")
    assert {s["log_end_offset"] for s in r["replicas_state"]} == {15}
    assert c.values("t") == sorted(str(i) for i in range(15))


def test_acks_all_needs_min_insync_replicas(cluster):
    c = cluster
    c.ok("topics", "create", "t", "--replication-factor", "3", "--config", "min.insync.replicas=2")
    assert c.produce("t", ["a", "b"])[0] == 0
    replicas = c.describe()[("t", 0)]["replicas"]
    c.ok("brokers", "stop", str(replicas[1]))
    assert c.produce("t", ["c"])[0] == 0  # two in sync: still enough
    c.ok("brokers", "stop", str(replicas[2]))
    r = c.describe()[("t", 0)]
    assert r["status"] == "under-replicated,under-min-isr" and r["under_min_isr"] and not r["offline"]
    assert sorted(c.describe("--under-min-isr-partitions")) == [("t", 0)]
    for acks in ([], ["--acks", "all"], ["--acks", "-1"]):
        code, out, err = c.produce("t", ["refused"], *acks)
        assert code == 1
        assert _error_line(err) == (f"plog: error: The size of the current ISR [{replicas[0]}] is insufficient to "
                                    "satisfy the min.isr requirement of 2 for partition t-0")
    assert c.values("t") == ["a", "b", "c"]
    code, out, err = c.produce("t", ["d"], "--acks", "1")
    assert code == 0, err
    assert c.values("t") == ["a", "b", "c", "d"]
    code, out, err = c.run("produce", "--help")
    assert "min.insync.replicas applies" in out


def test_crash_keeps_the_broker_in_its_isrs_until_its_session_times_out(tmp_path, capsys):
    c = Cluster(tmp_path, capsys, "--broker-config", "broker.session.timeout.ms=3600000")
    c.ok("topics", "create", "t", "--replica-assignment", "1:2:3")
    assert c.produce("t", range(5))[0] == 0
    assert (c.path / "broker-1" / ".kafka_cleanshutdown").is_file()
    doc = c.json("brokers", "stop", "1", "--crash")
    assert (doc["action"], doc["offline"], len(doc["events"])) == ("crash", [], 1)
    assert doc["events"][0]["message"] == "broker 1: crashed (still in its ISRs until the session timeout)"
    assert not (c.path / "broker-1" / ".kafka_cleanshutdown").exists()  # its next start recovers
    b = c.brokers()[1]
    assert (b["state"], b["fenced"], b["leaders"], b["in_sync"]) == ("crashed", False, 1, 1)
    r = c.describe()[("t", 0)]
    assert (r["leader"], r["leader_epoch"], r["isr"], r["status"]) == (1, 0, [1, 2, 3], "")
    assert r["replicas_state"][0]["state"] == "crashed"
    # Its leadership is stuck until the controller fences it: writes fail, one line.
    code, out, err = c.produce("t", ["x"])
    assert code == 1 and "the leader of t-0, broker 1, crashed" in _error_line(err)
    # Back before the session timed out: still the leader, in a new epoch.
    code, out, err = c.run("brokers", "start", "1")
    assert code == 0, err
    assert out.splitlines()[:2] == ["broker 1: started",
                                    "t-0: leader 1 -> 1, epoch 1, ISR [1,2,3] (broker 1 restarted)"]
    r = c.describe()[("t", 0)]
    assert (r["leader"], r["leader_epoch"], r["isr"]) == (1, 1, [1, 2, 3])
    assert c.produce("t", ["y"])[0] == 0
    assert c.values("t") == ["0", "1", "2", "3", "4", "y"]


def test_a_crashed_leader_is_fenced_by_the_next_writer_after_the_session_timeout(tmp_path, capsys):
    c = Cluster(tmp_path, capsys, "--broker-config", "broker.session.timeout.ms=0")
    c.ok("topics", "create", "t", "--replica-assignment", "1:2:3")
    assert c.produce("t", range(5))[0] == 0
    c.ok("brokers", "stop", "1", "--crash")
    b = c.brokers()[1]
    assert (b["state"], b["fenced"]) == ("crashed", False)  # reading never runs the controller
    assert c.produce("t", range(5, 8))[0] == 0  # the writer fences broker 1 and 2 leads
    b = c.brokers()[1]
    assert (b["state"], b["fenced"], b["leaders"], b["in_sync"]) == ("crashed", True, 0, 0)
    r = c.describe()[("t", 0)]
    assert (r["leader"], r["leader_epoch"], r["isr"], r["status"]) == (2, 1, [2, 3], "under-replicated")
    assert c.values("t") == [str(i) for i in range(8)]
    code, out, err = c.run("assign", "preferred-leaders", "--format", "json")
    assert code == 3 and json.loads(out)[0]["status"] == "Preferred replica 1 is not available (broker crashed)"
    code, out, err = c.run("assign", "preferred-leaders", "--dry-run")
    assert code == 3 and "Preferred replica 1 is not available" in out
    c.ok("brokers", "start", "1")
    code, out, err = c.run("assign", "preferred-leaders", "--format", "csv")
    assert code == 0, err
    assert list(csv.DictReader(io.StringIO(out)))[0]["status"] == "Elected 1 (leader was 2), epoch 2"
    assert c.values("t") == [str(i) for i in range(8)]


def test_unclean_election_then_the_old_leader_truncates_on_start(tmp_path, capsys):
    c = Cluster(tmp_path, capsys)
    c.ok("topics", "create", "u", "--replica-assignment", "1:2", "--config", "unclean.leader.election.enable=true")
    assert c.produce("u", range(5))[0] == 0
    c.ok("brokers", "stop", "2")
    assert c.produce("u", range(5, 8))[0] == 0  # on broker 1 only
    c.ok("brokers", "stop", "1")
    out = c.ok("brokers", "start", "2")
    assert "u-0: unclean election none -> 2, epoch 2, ISR [2] (broker 2 started)" in out.splitlines()
    assert c.produce("u", ["x", "y"])[0] == 0  # offsets 5..6 again, on broker 2
    code, out, err = c.run("brokers", "start", "1")
    assert code == 0, err
    assert ("u-0 on broker 1: truncated 8 -> 5 (leader's end offset for epoch 0 is 5); fetched ") in out
    assert "bytes, offsets 5..6\n" in out and "u-0: ISR [2] -> [1,2] (replica(s) [1] caught up)" in out
    assert "1 truncated" in err
    r = c.describe()[("u", 0)]
    assert [(s["broker"], s["log_end_offset"], s["leader_epoch"]) for s in r["replicas_state"]] == [(1, 7, 2),
                                                                                                  (2, 7, 2)]
    # The unclean election lost what only broker 1 had, as in Kafka.
    assert c.values("u") == ["0", "1", "2", "3", "4", "x", "y"]


def test_start_json_reports_the_truncation(tmp_path, capsys):
    c = Cluster(tmp_path, capsys)
    c.ok("topics", "create", "u", "--replica-assignment", "1:2", "--config", "unclean.leader.election.enable=true")
    assert c.produce("u", range(3))[0] == 0
    c.ok("brokers", "stop", "2")
    assert c.produce("u", range(3, 6))[0] == 0
    c.ok("brokers", "stop", "1")
    c.ok("brokers", "start", "2")
    doc = c.json("brokers", "start", "1")
    (catch_up,) = doc["catch_ups"]
    assert catch_up["truncation"] == {"log_end_offset": 6, "truncated_to": 3, "removed": 3,
                                      "reason": "leader's end offset for epoch 0 is 3"}
    assert (catch_up["bytes"], catch_up["records_from"], doc["bytes"]) == (0, None, 0)
    assert [e["message"] for e in doc["isr_events"]] == ["u-0: ISR [2] -> [1,2] (replica(s) [1] caught up)"]
    code, out, err = c.run("brokers", "start", "1", "--format", "json")
    assert code == 0 and json.loads(out)["events"] == [] and err == "broker 1 is already running\n"


def test_bad_ids_and_usage_errors(cluster):
    c = cluster
    for cmd in ("stop", "start"):
        code, out, err = c.run("brokers", cmd, "9")
        assert (code, out) == (1, "")
        assert err == "plog: error: broker 9 is not in this data directory (brokers: 1, 2, 3)\n"
        code, out, err = c.run("brokers", cmd, "x")
        assert code == 2
    code, out, err = c.run("brokers", "stop", "1", "--format", "table")
    assert code == 2
    code, out, err = plog(c.capsys, "brokers", "list", "-d", str(c.path) + "-missing")
    assert code == 1 and err.count("\n") == 1 and "no plog data directory" in err
    code, out, err = c.run("assign", "preferred-leaders", "--topic", "nope")
    assert code == 1 and err.count("\n") == 1 and "nope" in err
    for cmd in ("list", "stop", "start"):
        code, out, err = plog(c.capsys, "brokers", cmd, "--help")
        assert code == 0 and "Example" in out and "Exit status: 0 success" in out
    assert [b["state"] for b in c.brokers().values()] == ["running"] * 3


def test_a_kafka_log_directory_reads_without_writing(cluster):
    """A plain Kafka log directory (read-only): brokers list, describe and a preferred-leader
    report that has nothing to elect work without a lock or a write."""
    c = cluster
    c.ok("topics", "create", "t", "--replica-assignment", "2")
    assert c.produce("t", range(4))[0] == 0
    kafka_dir = c.path / "broker-2"
    before = sorted(p.name for p in kafka_dir.iterdir())
    code, out, err = plog(c.capsys, "assign", "preferred-leaders", "-f", "json", "-d", str(kafka_dir))
    assert code == 0, err
    assert [(x["leader"], x["status"]) for x in json.loads(out)] == [(2, "Valid replica already elected")]
    code, out, err = plog(c.capsys, "topics", "describe", "-f", "json", "-d", str(kafka_dir))
    assert code == 0, err
    (row,) = json.loads(out)
    # No controller record on disk (no metadata log): the leader and ISR are unknown, the
    # epoch is the replica's own; no process holds the directory's lock: its broker stopped.
    assert (row["leader"], row["isr"], row["log_end_offset"], row["status"], row["source"]) == \
        (None, None, 4, "", "partition folders")
    assert [(r["broker"], r["state"], r["in_sync"]) for r in row["replicas_state"]] == [(2, "stopped", None)]
    code, out, err = plog(c.capsys, "brokers", "list", "-f", "json", "-d", str(kafka_dir))
    assert code == 0 and [(b["id"], b["state"]) for b in json.loads(out)] == [(2, "running")]
    code, out, err = plog(c.capsys, "brokers", "stop", "2", "-d", str(kafka_dir))
    assert code == 1 and err.count("\n") == 1 and "Kafka log directory" in err
    assert sorted(p.name for p in kafka_dir.iterdir()) == before
