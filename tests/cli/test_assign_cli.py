"""``plog assign``: generate, execute, verify, preferred-leaders and report through the Typer
app (CliRunner), and one real run of the installed script."""

from __future__ import annotations

import csv
import io
import json
import subprocess

import pytest
from typer.testing import CliRunner

from cli_run import plog_exe
from plog.cli.main import app
from plog.engine.cluster.data_dir import DataDir
from plog.engine.clients.consumer import Consumer
from plog.engine.errors import BrokerNotAvailableError, InvalidReplicaAssignmentError
from plog.engine.clients.producer import Producer

runner = CliRunner()

ASSIGNMENT = {0: [1, 2], 1: [2, 3], 2: [3, 1]}
CURRENT_JSON = ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
                '{"topic":"t","partition":1,"replicas":[2,3],"log_dirs":["any","any"]},'
                '{"topic":"t","partition":2,"replicas":[3,1],"log_dirs":["any","any"]}]}')
MOVE_JSON = ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[3,4]},'
             '{"topic":"t","partition":1,"replicas":[4,1]},{"topic":"t","partition":2,"replicas":[4,2]}]}')


def invoke(*args, input=None):
    return runner.invoke(app, [str(a) for a in args], input=input)


@pytest.fixture
def dd(tmp_path) -> DataDir:
    d = DataDir.init(tmp_path / "d", brokers=4)
    d.create_topic("t", replica_assignment=ASSIGNMENT)
    with Producer(d) as p:
        for i in range(24):
            p.send("t", f"v{i}".encode(), partition=i % 3)
    return d


def _values(path) -> list[bytes]:
    d = DataDir.open(path)
    c = Consumer(d, auto_offset_reset="earliest")
    c.assign(d.partitions("t"))
    out = []
    while True:
        got = c.poll(0)
        if not got:
            break
        out.extend(r.value for r in got)
    c.close()
    return sorted(out)


ALL_VALUES = sorted(f"v{i}".encode() for i in range(24))


def test_every_command_has_help_with_an_example_and_the_exit_status():
    for cmd in ("generate", "execute", "verify", "preferred-leaders", "report"):
        r = invoke("assign", cmd, "--help")
        assert r.exit_code == 0, r.output
        assert "Example: plog assign " + cmd in r.stdout and "Exit status: 0 success" in r.stdout
        assert "--data-dir" in r.stdout
    r = invoke("assign", "--help")
    assert r.exit_code == 0 and all(c in r.stdout for c in ("generate", "execute", "verify", "report"))


def test_generate_prints_current_and_proposed_like_kafka(dd, tmp_path):
    topics = tmp_path / "topics.json"
    topics.write_text('{"version":1,"topics":[{"topic":"t"}]}')
    r = invoke("assign", "generate", "--topics-to-move-json-file", topics, "--broker-list", "2,3,4",
               "--data-dir", dd.path)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment" and lines[1] == CURRENT_JSON
    assert lines[2] == "" and lines[3] == "Proposed partition reassignment configuration" and len(lines) == 5
    proposed = json.loads(lines[4])
    assert proposed["version"] == 1 and [p["partition"] for p in proposed["partitions"]] == [0, 1, 2]
    for p in proposed["partitions"]:
        assert set(p["replicas"]) <= {2, 3, 4} and len(p["replicas"]) == 2 and p["log_dirs"] == ["any", "any"]

    r = invoke("assign", "generate", "--topics-to-move-json-file", topics, "--broker-list", "3,4",
               "--format", "json", "-d", dd.path)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert set(doc) == {"current", "proposed"} and doc["current"] == json.loads(CURRENT_JSON)
    assert all(sorted(p["replicas"]) == [3, 4] for p in doc["proposed"]["partitions"])

    r = invoke("assign", "generate", "--topics-to-move-json-file", topics, "--broker-list", "1,x", "-d", dd.path)
    assert r.exit_code == 2 and "broker ids" in r.output


def test_execute_prints_the_rollback_plan_then_moves_and_verify_agrees(dd, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(MOVE_JSON)
    r = invoke("assign", "verify", "--reassignment-json-file", plan, "--data-dir", dd.path)
    assert r.exit_code == 3
    assert r.stdout.splitlines()[:2] == [
        "Status of partition reassignment:",
        "There is no active reassignment of partition t-0, but replica set is 1,2 rather than 3,4."]

    r = invoke("assign", "execute", "--reassignment-json-file", plan, "--data-dir", dd.path)
    assert r.exit_code == 0, r.output
    assert r.stdout == (f"Current partition replica assignment\n\n{CURRENT_JSON}\n\n"
                        "Save this to use as the --reassignment-json-file option during rollback\n")
    assert "t-0: moved: replicas 1,2 -> 3,4 (copied from broker 1 to 3,4" in r.stderr
    assert "Successfully completed partition reassignments for t-0,t-1,t-2" in r.stderr
    assert DataDir.open(dd.path).topic("t").replicas == [[3, 4], [4, 1], [4, 2]]
    assert _values(dd.path) == ALL_VALUES

    r = invoke("assign", "verify", "--reassignment-json-file", plan, "--data-dir", dd.path)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == "Status of partition reassignment:"
    assert [x for x in lines if x.startswith("Reassignment")] == [
        f"Reassignment of partition t-{p} is completed." for p in range(3)]
    assert "  replicas: 3 (offsets 0..8), 4 (offsets 0..8)" in lines

    r = invoke("assign", "verify", "--reassignment-json-file", plan, "--format", "json", "--data-dir", dd.path)
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["complete"] is True
    assert [p["state"] for p in doc["partitions"]] == ["completed"] * 3
    assert doc["partitions"][1]["replicas"][0] == {"broker": 4, "exists": True, "log_start_offset": 0,
                                                   "log_end_offset": 8,
                                                   "path": str(dd.broker_log_dir(4) / "t-1")}

    # Roll back from stdin with the printed plan; JSON output.
    r = invoke("assign", "execute", "--reassignment-json-file", "-", "--format", "json", "-d", dd.path,
               input=CURRENT_JSON)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["proposed"] == json.loads(CURRENT_JSON)
    assert [p["action"] for p in doc["partitions"]] == ["move"] * 3
    assert doc["partitions"][0]["copied_to"] == [1, 2] and doc["partitions"][0]["removed_from"] == [3, 4]
    assert DataDir.open(dd.path).topic("t").replicas == [ASSIGNMENT[p] for p in range(3)]
    assert _values(dd.path) == ALL_VALUES


def test_execute_rejects_invalid_plans_before_printing_or_moving(dd, tmp_path):
    before = (dd.path / "cluster.json").read_bytes()
    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,7]}]}')
    r = invoke("assign", "execute", "--reassignment-json-file", plan, "-d", dd.path)
    assert r.exit_code == 1 and isinstance(r.exception, BrokerNotAvailableError)
    assert str(r.exception) == "Unknown broker id 7" and r.stdout == ""
    plan.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,2]}]}')
    r = invoke("assign", "execute", "--reassignment-json-file", plan, "-d", dd.path)
    assert isinstance(r.exception, InvalidReplicaAssignmentError)
    assert str(r.exception) == ("Partition replica lists may not contain duplicate entries: "
                                "t-0 contains multiple entries for 2")
    assert (dd.path / "cluster.json").read_bytes() == before


def test_preferred_leaders_and_report(dd):
    r = invoke("assign", "preferred-leaders", "--topic", "t", "--format", "json", "-d", dd.path)
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [(x["partition"], x["preferred_leader"], x["leader"], x["elected"], x["status"]) for x in rows] == [
        (0, 1, 1, False, "Valid replica already elected"), (1, 2, 2, False, "Valid replica already elected"),
        (2, 3, 3, False, "Valid replica already elected")]
    r = invoke("assign", "preferred-leaders", "-d", dd.path)
    assert r.exit_code == 0 and "PREFERRED" in r.stdout and "Valid replica already elected" in r.stdout
    # A preferred leader that cannot lead (its broker stopped): found problems.
    assert invoke("brokers", "stop", "2", "-d", dd.path).exit_code == 0
    r = invoke("assign", "preferred-leaders", "-d", dd.path, "-f", "csv")
    assert r.exit_code == 3 and "Preferred replica 2 is not available (broker stopped)" in r.stdout
    (dd.broker_log_dir(2) / "t-1").rename(dd.broker_log_dir(2) / "moved-away")

    r = invoke("assign", "report", "--format", "csv", "-d", dd.path)
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    # Current leaders: t-1 moved from the stopped broker 2 to 3.
    assert [(x["broker"], x["leaders"], x["replicas"], x["folders"]) for x in rows] == [
        ("1", "1", "2", "2"), ("2", "0", "2", "1"), ("3", "2", "2", "2"), ("4", "0", "0", "0")]
    assert int(rows[0]["size"]) > 0 and rows[3]["size"] == "0"
    r = invoke("assign", "report", "-d", dd.path)
    assert r.exit_code == 0 and r.stdout.splitlines()[0].split() == ["BROKER", "RACK", "LEADERS", "REPLICAS",
                                                                     "FOLDERS", "SIZE"]


def test_real_process_moves_a_partition_and_reports_errors_on_one_line(dd, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(MOVE_JSON)
    r = subprocess.run([plog_exe(), "assign", "execute", "--reassignment-json-file", str(plan), "-d", str(dd.path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Current partition replica assignment\n\n" + CURRENT_JSON)
    r = subprocess.run([plog_exe(), "assign", "verify", "--reassignment-json-file", str(plan), "-d", str(dd.path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.count("is completed.") == 3
    r = subprocess.run([plog_exe(), "verify", str(dd.broker_log_dir(4) / "t-2")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _values(dd.path) == ALL_VALUES

    plan.write_text('{"version":1,"partitions":[{"topic":"t","partition":9,"replicas":[1]}]}')
    r = subprocess.run([plog_exe(), "assign", "execute", "--reassignment-json-file", str(plan), "-d", str(dd.path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == "plog: error: Unable to find partition: t-9\n"
    r = subprocess.run([plog_exe(), "assign", "execute", "--reassignment-json-file", str(tmp_path / "missing.json"),
                        "-d", str(dd.path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "missing.json" in r.stderr
