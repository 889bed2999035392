"""``plog groups list|describe|reset-offsets|delete`` through the Typer app (CliRunner) with
exact output, their one-line errors through ``main``'s error boundary, and real subprocess
runs of the installed ``plog`` script (a data directory, and a Kafka log directory from the
corpus)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import CORPUS, ROOT
from plog.cli.main import app, main
from plog.engine.cluster.data_dir import DataDir
from plog.engine.clients.consumer import Consumer
from plog.engine.groups.coordinator import GroupCoordinator
from plog.engine.clients.producer import Producer
from plog.engine.storage.file_names import TopicPartition

runner = CliRunner()
BASE = 1_714_521_600_000  # 2024-05-01T00:00:00Z
PLOG = Path(sys.executable).parent / "plog"  # the venv's console script
KAFKA_DIR_REL = "../shared/corpus/ArthurArutunyan04__Backend_labs/kafka-data"  # from the repo root
KAFKA_DIR = CORPUS / "ArthurArutunyan04__Backend_labs/kafka-data"
KAFKA_GROUP = "universe-labs-oms-consumer"


def invoke(*args, input=None):
    return runner.invoke(app, [str(a) for a in args], input=input)


def run_main(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def lines(text: str) -> list[str]:
    # Rich pads a left-aligned last column; the cells are what matter.
    return [line.rstrip() for line in text.splitlines()]


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """``orders``: 10 records in partition 0 (at BASE + i s), 6 in partition 1 (BASE + 2i s);
    group ``g1`` committed offset 4 on partition 0, no members. Built once (producing and
    creating __consumer_offsets fsync a lot); each test gets a copy."""
    path = tmp_path_factory.mktemp("groups") / "d"
    dd = DataDir.init(path, brokers=1)
    dd.create_topic("orders", replica_assignment={0: [1], 1: [1]})
    with Producer(dd) as p:
        for i in range(10):
            p.send("orders", b"v%d" % i, partition=0, timestamp_ms=BASE + i * 1000)
        for i in range(6):
            p.send("orders", b"w%d" % i, partition=1, timestamp_ms=BASE + i * 2000)
    c = Consumer(dd, group_id="g1", auto_offset_reset="earliest", enable_auto_commit=False)
    c.subscribe(["orders"])
    seen = 0
    for _ in range(200):
        seen += len(c.poll(10))
        if seen >= 16:
            break
    c.commit({TopicPartition("orders", 0): 4})
    c.close()
    return path


@pytest.fixture
def data_dir(template, tmp_path) -> Path:
    shutil.copytree(template, tmp_path / "d")
    return tmp_path / "d"


def committed(path, group="g1") -> dict:
    return {(tp.topic, tp.partition): c.offset
            for tp, c in GroupCoordinator(DataDir.open(path)).committed(group).items()}


@pytest.fixture
def live_member(data_dir):
    c = Consumer(DataDir.open(data_dir), group_id="g1", client_id="billing-1", auto_offset_reset="earliest",
                 enable_auto_commit=False)
    c.subscribe(["orders"])
    yield c
    c.close()


# -- help -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["list", "describe", "reset-offsets", "delete"])
def test_help_has_an_example_and_the_exit_status(command):
    r = invoke("groups", command, "--help")
    assert r.exit_code == 0
    text = " ".join(r.stdout.split())  # Click rewraps the epilog
    assert "Example" in text and "plog groups " + command in text
    assert "Exit status: 0 success, 1 error" in text and "2 usage error" in text
    assert "--data-dir" in text


def test_groups_help_lists_the_commands():
    r = invoke("groups", "--help")
    assert r.exit_code == 0
    for command in ("list", "describe", "reset-offsets", "delete"):
        assert command in r.stdout


# -- list -----------------------------------------------------------------------------------------


def test_list(data_dir, live_member):
    invoke("groups", "reset-offsets", "offsets-only", "--topic", "orders", "--to-earliest", "--execute",
           "-d", data_dir)
    r = invoke("groups", "list", "-d", data_dir)
    assert r.exit_code == 0, r.stderr
    assert lines(r.stdout) == [
        "GROUP         STATE   PROTOCOL-TYPE  PROTOCOL  #MEMBERS",
        "g1            Stable  consumer       range            1",
        "offsets-only  Empty   -              -                0",
    ]
    r = invoke("groups", "list", "--state", "empty", "--format", "jsonl", "-d", data_dir)
    assert [json.loads(line) for line in r.stdout.splitlines()] == [
        {"group": "offsets-only", "state": "Empty", "protocol_type": None, "protocol": None, "members": 0}]
    r = invoke("groups", "list", "--state", "sleepy", "-d", data_dir)
    assert r.exit_code == 2 and "Invalid state list 'sleepy'" in r.stderr


# -- describe -------------------------------------------------------------------------------------


def test_describe_table_and_note(data_dir):
    r = invoke("groups", "describe", "g1", "-d", data_dir)
    assert r.exit_code == 0, r.stderr
    assert lines(r.stdout) == [
        "GROUP  TOPIC   PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  CONSUMER-ID  HOST  CLIENT-ID",
        "g1     orders          0               4              10    6  -            -     -",
    ]
    assert r.stderr == "Consumer group 'g1' has no active members.\n"
    assert invoke("groups", "describe", "g1", "-q", "-d", data_dir).stderr == ""


def test_describe_with_a_live_member(data_dir, live_member):
    member = live_member._member_id
    r = invoke("groups", "describe", "g1", "--format", "json", "-d", data_dir)
    assert r.exit_code == 0, r.stderr
    rows = json.loads(r.stdout)
    host = rows[0]["host"]
    assert host.startswith("/")
    assert rows == [
        {"group": "g1", "topic": "orders", "partition": 0, "current_offset": 4, "log_end_offset": 10, "lag": 6,
         "consumer_id": member, "host": host, "client_id": "billing-1", "leader_epoch": 0},
        {"group": "g1", "topic": "orders", "partition": 1, "current_offset": None, "log_end_offset": 6,
         "lag": None, "consumer_id": member, "host": host, "client_id": "billing-1", "leader_epoch": None},
    ]
    r = invoke("groups", "describe", "g1", "--members", "--verbose", "--format", "csv", "-d", data_dir)
    assert r.stdout.splitlines() == ["group,consumer_id,host,client_id,partitions,assignment",
                                     f"g1,{member},{host},billing-1,2,\"orders:0,1\""]
    r = invoke("groups", "describe", "g1", "--state", "--format", "csv", "-d", data_dir)
    generation = live_member._generation
    assert r.stdout.splitlines() == ["group,protocol_type,assignment_strategy,state,generation,members",
                                     f"g1,consumer,range,Stable,{generation},1"]


def test_describe_usage_and_unknown_group(data_dir, capsys):
    code, out, err = run_main(capsys, "groups", "describe", "nope", "-d", data_dir)
    assert (code, out, err) == (1, "", "plog: error: Consumer group 'nope' does not exist.\n")
    assert invoke("groups", "describe", "-d", data_dir).exit_code == 2
    assert invoke("groups", "describe", "g1", "--members", "--state", "-d", data_dir).exit_code == 2
    r = invoke("groups", "describe", "--all-groups", "--format", "csv", "-q", "-d", data_dir)
    assert r.stdout.splitlines()[1:] == ["g1,orders,0,4,10,6,,,"]


# -- reset-offsets --------------------------------------------------------------------------------


def test_reset_dry_run_is_the_default(data_dir):
    r = invoke("groups", "reset-offsets", "g1", "--topic", "orders", "--to-earliest", "-d", data_dir)
    assert r.exit_code == 0, r.stderr
    assert lines(r.stdout) == [
        "GROUP  TOPIC   PARTITION  NEW-OFFSET  CURRENT-OFFSET",
        "g1     orders          0           0               4",
        "g1     orders          1           0               -",
    ]
    assert r.stderr == "Dry run: nothing committed for group 'g1' (2 partition(s)); add --execute to commit.\n"
    assert committed(data_dir) == {("orders", 0): 4}
    r = invoke("groups", "reset-offsets", "g1", "--topic", "orders", "--to-earliest", "--dry-run", "-d", data_dir)
    assert r.exit_code == 0 and committed(data_dir) == {("orders", 0): 4}


@pytest.mark.parametrize("strategy, expected", [
    (["--to-earliest"], {0: 0, 1: 0}),
    (["--to-latest"], {0: 10, 1: 6}),
    (["--to-offset", "7"], {0: 7, 1: 6}),
    (["--to-datetime", "2024-05-01T00:00:07.000"], {0: 7, 1: 4}),
    (["--to-datetime", "2024-05-01T03:00:07.000+0300"], {0: 7, 1: 4}),
    (["--by-duration", "P36500D"], {0: 0, 1: 0}),
    (["--to-current"], {0: 4, 1: 6}),
    (["--to", "-3"], {0: 7, 1: 3}),
])
def test_reset_execute(data_dir, strategy, expected):
    r = invoke("groups", "reset-offsets", "g1", "--topic", "orders", *strategy, "--execute", "--format", "csv",
               "-d", data_dir)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == ["group,topic,partition,new_offset,current_offset",
                                     f"g1,orders,0,{expected[0]},4", f"g1,orders,1,{expected[1]},"]
    assert r.stderr == "Committed 2 offset(s) for group 'g1'.\n"
    assert committed(data_dir) == {("orders", p): o for p, o in expected.items()}


def test_reset_shift_by_all_topics(data_dir):
    r = invoke("groups", "reset-offsets", "g1", "--all-topics", "--shift-by", "-3", "--execute", "-q",
               "-d", data_dir)
    assert r.exit_code == 0 and r.stderr == ""
    assert committed(data_dir) == {("orders", 0): 1}


def test_reset_export_and_from_file(data_dir, tmp_path):
    r = invoke("groups", "reset-offsets", "g1", "--topic", "orders:1", "--topic", "orders:0", "--to-offset", "5",
               "--export", "-d", data_dir)
    assert r.exit_code == 0 and r.stdout == "orders,0,5\norders,1,5\n"
    plan = tmp_path / "plan.csv"
    plan.write_text("orders,0,2\norders,1,99\n")
    r = invoke("groups", "reset-offsets", "g1", "--from-file", plan, "--execute", "--export", "-d", data_dir)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "orders,0,2\norders,1,6\n"  # 99 clamped to the log end
    assert committed(data_dir) == {("orders", 0): 2, ("orders", 1): 6}
    # '-' reads the plan from stdin: the multi-group form keeps only this group's rows.
    r = invoke("groups", "reset-offsets", "g1", "--from-file", "-", "--execute", "-d", data_dir,
               input="g2,orders,0,9\ng1,orders,1,3\n")
    assert r.exit_code == 0, r.stderr
    assert committed(data_dir) == {("orders", 0): 2, ("orders", 1): 3}


@pytest.mark.parametrize("args, message", [
    (["--topic", "orders"], "give exactly one reset strategy"),
    (["--topic", "orders", "--to-earliest", "--to-latest"], "(got --to-earliest, --to-latest)"),
    (["--to-earliest"], "One of the reset scopes should be defined"),
    (["--topic", "orders", "--all-topics", "--to-earliest"], "One of the reset scopes should be defined"),
    (["--topic", "orders:x", "--to-earliest"], "Invalid partition 'x' specified in topic arg 'orders:x'"),
    (["--topic", "orders", "--to-datetime", "yesterday"], "YYYY-MM-DDTHH:mm:SS.sss"),
    (["--topic", "orders", "--by-duration", "2h"], "PnDTnHnMnS"),
    (["--topic", "orders", "--to", "soon"], "invalid offset 'soon'"),
    (["--topic", "orders", "--to-earliest", "--dry-run", "--execute"], "--dry-run or --execute"),
    (["--topic", "orders", "--to-earliest", "--export", "--format", "json"], "--export"),
    (["--topic", "orders", "--from-file", "plan.csv"], "--from-file takes its partitions from the file"),
])
def test_reset_usage_errors(data_dir, args, message):
    r = invoke("groups", "reset-offsets", "g1", *args, "-d", data_dir)
    assert r.exit_code == 2, r.stdout
    assert message in " ".join(r.stderr.split())


def test_reset_errors_are_one_line(data_dir, live_member, capsys, tmp_path):
    code, out, err = run_main(capsys, "groups", "reset-offsets", "g1", "--topic", "orders", "--to-earliest",
                              "--execute", "-d", data_dir)
    assert (code, out) == (1, "")
    assert err == ("plog: error: Assignments can only be reset if the group 'g1' is inactive, "
                   "but the current state is Stable.\n")
    assert committed(data_dir) == {("orders", 0): 4}
    code, out, err = run_main(capsys, "groups", "reset-offsets", "other", "--topic", "orders:0,5", "--to-latest",
                              "-d", data_dir)
    assert code == 1 and err.startswith('plog: error: The partitions "orders-5" do not exist') and err.count("\n") == 1
    code, _, err = run_main(capsys, "groups", "reset-offsets", "other", "--topic", "orders", "--shift-by", "1",
                            "-d", data_dir)
    assert (code, err) == (1, "plog: error: Cannot shift offset for partition orders-0 since there is no current "
                              "committed offset\n")
    bad = tmp_path / "bad.csv"
    bad.write_text("orders,0,1\norders;1;2\n")
    code, _, err = run_main(capsys, "groups", "reset-offsets", "other", "--from-file", bad, "-d", data_dir)
    assert (code, err) == (1, f"plog: error: {bad}:2: expected topic,partition,offset, got 'orders;1;2'\n")
    code, _, err = run_main(capsys, "groups", "reset-offsets", "other", "--from-file", tmp_path / "missing.csv",
                            "-d", data_dir)
    assert code == 1 and "missing.csv" in err and err.count("\n") == 1


# -- delete ---------------------------------------------------------------------------------------


def test_delete(data_dir, capsys):
    invoke("groups", "reset-offsets", "g2", "--topic", "orders", "--to-latest", "--execute", "-d", data_dir)
    code, out, err = run_main(capsys, "groups", "delete", "g1", "nope", "-d", data_dir)
    assert (code, out) == (1, "")
    assert err.splitlines() == ["plog: error: Deleting group 'nope' failed because the group does not exist.",
                                "These consumer groups were deleted successfully: 'g1'"]
    r = invoke("groups", "delete", "g2", "-d", data_dir)
    assert r.exit_code == 0 and r.stderr == "Deletion of requested consumer groups ('g2') was successful.\n"
    assert invoke("groups", "list", "--format", "json", "-d", data_dir).stdout == "[]\n"


def test_delete_refuses_a_group_with_members(data_dir, live_member):
    r = invoke("groups", "delete", "g1", "-d", data_dir)
    assert r.exit_code == 1
    assert r.stderr == ("plog: error: Deleting group 'g1' failed because the group is not empty "
                        "(1 active member(s)).\n")


# -- a Kafka log directory, and real subprocesses -------------------------------------------------


def test_describe_kafka_log_dir(corpus):
    """Expected values: ``plog dump --offsets-decoder`` of the group's __consumer_offsets-19
    segment (the last GroupMetadata and the six OffsetCommit records) and the partitions' log
    end offsets (``plog topics describe``); see tests/engine/groups/test_group_admin.py."""
    r = invoke("groups", "describe", KAFKA_GROUP, "--format", "csv", "-d", KAFKA_DIR)
    assert r.exit_code == 0, r.stderr
    a, b = "rdkafka-1bc005e0-f563-4fca-bed5-1b8a0c9691d4", "rdkafka-68d84c5d-68c8-4027-955a-b24c32315bcc"
    assert r.stdout.splitlines() == [
        "group,topic,partition,current_offset,log_end_offset,lag,consumer_id,host,client_id",
        f"{KAFKA_GROUP},oms_order_created,0,,12427,,{a},/172.18.0.7,rdkafka",
        f"{KAFKA_GROUP},oms_order_created,1,81731,94646,12915,{a},/172.18.0.7,rdkafka",
        f"{KAFKA_GROUP},oms_order_created,2,40705,53222,12517,{a},/172.18.0.7,rdkafka",
        f"{KAFKA_GROUP},oms_order_created,3,82261,95134,12873,{a},/172.18.0.7,rdkafka",
        f"{KAFKA_GROUP},oms_order_created,4,,12456,,{a},/172.18.0.7,rdkafka",
        f"{KAFKA_GROUP},oms_order_status_changed,0,,3298,,{b},/172.18.0.7,rdkafka",
        f"{KAFKA_GROUP},oms_order_status_changed,1,21188,24651,3463,{b},/172.18.0.7,rdkafka",
        f"{KAFKA_GROUP},oms_order_status_changed,2,10889,14175,3286,{b},/172.18.0.7,rdkafka",
        f"{KAFKA_GROUP},oms_order_status_changed,3,21677,24979,3302,{b},/172.18.0.7,rdkafka",
        f"{KAFKA_GROUP},oms_order_status_changed,4,,3315,,{b},/172.18.0.7,rdkafka",
    ]
    assert "as last recorded in __consumer_offsets" in r.stderr
    r = invoke("groups", "reset-offsets", KAFKA_GROUP, "--all-topics", "--to-earliest", "--export", "-d", KAFKA_DIR)
    assert r.exit_code == 0 and r.stdout.splitlines() == [
        "oms_order_created,1,81908", "oms_order_created,2,40821", "oms_order_created,3,82506",
        "oms_order_status_changed,1,21236", "oms_order_status_changed,2,10917", "oms_order_status_changed,3,21748"]


def test_subprocess_describe_data_dir(data_dir):
    r = subprocess.run([str(PLOG), "groups", "describe", "g1", "--data-dir", str(data_dir)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert lines(r.stdout) == [
        "GROUP  TOPIC   PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  CONSUMER-ID  HOST  CLIENT-ID",
        "g1     orders          0               4              10    6  -            -     -",
    ]
    assert r.stderr == "Consumer group 'g1' has no active members.\n"
    r = subprocess.run([str(PLOG), "groups", "describe", "nope", "--data-dir", str(data_dir)],
                       capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stdout, r.stderr) == (1, "", "plog: error: Consumer group 'nope' does not exist.\n")


def test_subprocess_describe_kafka_log_dir_relative_path(corpus):
    before = {p: p.stat().st_mtime_ns for p in KAFKA_DIR.rglob("*")}
    r = subprocess.run([str(PLOG), "groups", "describe", KAFKA_GROUP, "--data-dir", KAFKA_DIR_REL, "-q",
                        "--format", "jsonl"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(x["topic"], x["partition"], x["current_offset"], x["log_end_offset"], x["lag"]) for x in rows] == [
        ("oms_order_created", 0, None, 12427, None), ("oms_order_created", 1, 81731, 94646, 12915),
        ("oms_order_created", 2, 40705, 53222, 12517), ("oms_order_created", 3, 82261, 95134, 12873),
        ("oms_order_created", 4, None, 12456, None), ("oms_order_status_changed", 0, None, 3298, None),
        ("oms_order_status_changed", 1, 21188, 24651, 3463), ("oms_order_status_changed", 2, 10889, 14175, 3286),
        ("oms_order_status_changed", 3, 21677, 24979, 3302), ("oms_order_status_changed", 4, None, 3315, None)]
    assert r.stderr == ""
    r = subprocess.run([str(PLOG), "groups", "reset-offsets", KAFKA_GROUP, "--all-topics", "--to-latest",
                        "--execute", "--data-dir", KAFKA_DIR_REL], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "is a Kafka log directory" in r.stderr
    assert {p: p.stat().st_mtime_ns for p in KAFKA_DIR.rglob("*")} == before
