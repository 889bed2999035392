"""``plog simulate``: the timeline, the JSON report, data directories and exit codes, through
the real entry point (cli.main.main)."""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
from pathlib import Path

import pytest
from cli_run import plog

from plog.engine.cluster.data_dir import DataDir
from plog.engine.storage.file_names import TopicPartition

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scenarios"
LOSS = str(EXAMPLES / "leader-epoch-loss.yaml")
DIVERGENCE = str(EXAMPLES / "leader-epoch-divergence.yaml")


@pytest.fixture(autouse=True)
def _tmp(tmp_path, monkeypatch):
    # The default (temporary) data directory goes under tmp_path; no fsync (not under test).
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def _write(tmp_path, text: str) -> str:
    p = tmp_path / "scenario.yaml"
    p.write_text(text)
    return str(p)


def test_story_a_timeline(capsys, tmp_path):
    code, out, err = plog(capsys, "simulate", LOSS)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == ("# leader epochs, story (a): a restarted follower keeps what it fetched: "
                        "2 broker(s) 1, 2, truncation leader-epoch")
    assert "[t=0.0s] step 1: produce {topic: t, partition: 0, values: [m0], acks: 1}" in lines
    # after the two single fetches: the leader knows B has m1, B does not know the HW moved
    at = lines.index("[t=0.0s] step 9: fetch {broker: 2}")
    assert lines[at + 1:at + 3] == [
        "  t-0: broker 2 fetched nothing new at offset 2",
        "  t-0  broker 1*: LEO 2 HW 2 epoch 0 ISR | broker 2: LEO 2 HW 1 epoch 0 ISR",
    ]
    at = lines.index("[t=10.0s] step 15: advance 10s")
    assert lines[at + 1:at + 4] == [
        "  broker 1: fenced: no heartbeat for 9000 ms",
        "  t-0: leader 1 -> 2, epoch 1, ISR [2] (broker 1 fenced)",
        "  t-0  broker 1 (crashed, fenced): LEO 2 HW 1 epoch 0 out-of-ISR | broker 2*: LEO 2 HW 2 epoch 1 ISR",
    ]
    assert "FAILED" not in out
    assert err.strip() == "18 steps, every expectation held"
    assert list(tmp_path.iterdir()) == []  # the temporary data directory is gone


def test_story_a_with_high_watermark_truncation_exits_3(capsys):
    code, out, err = plog(capsys, "simulate", LOSS, "--truncation", "high-watermark")
    assert code == 3
    assert out.splitlines()[0].endswith("truncation high-watermark")
    assert "  t-0: broker 2 truncated 2 -> 1 (its own high watermark, at start (no leader epochs))" in out
    assert "  FAILED: expect values t-0: expected [m0, m1], got [m0]" in out
    assert out.splitlines()[-1] == "acknowledged but missing below the high watermark of t-0: [m1]"
    assert err.strip() == "3 expectations failed"


def test_story_b_json_report_and_kept_data_dir(capsys, tmp_path):
    dd_path = tmp_path / "kept"
    code, out, err = plog(capsys, "simulate", DIVERGENCE, "--format", "json", "--data-dir", str(dd_path))
    assert code == 0, err
    doc = json.loads(out)
    assert doc["ok"] is True and doc["failures"] == [] and doc["error"] is None
    assert doc["truncation"] == "leader-epoch" and doc["data_dir"] == str(dd_path.absolute())
    assert doc["acked"] == {"t-0": ["m0", "m1", "m2"]} and doc["acked_lost"] == {"t-0": ["m1"]}
    last = doc["steps"][-2]  # start 1
    assert last["text"] == "start 1" and last["time_ms"] == 41000
    assert "t-0: broker 1 truncated 2 -> 1 (leader's end offset for epoch 0 is 1)" in last["details"]
    (part,) = last["partitions"]
    assert part["leader"] == 2 and part["isr"] == [1, 2]
    assert [(r["broker"], r["log_end_offset"], r["high_watermark"]) for r in part["replicas"]] == [(1, 2, 2), (2, 2, 2)]
    # the kept directory holds real, valid partitions with the same bytes
    dd = DataDir.open(dd_path)
    tp = TopicPartition("t", 0)
    logs = [b"".join(p.read_bytes() for p in sorted(dd.partition_path(tp, b).glob("*.log"))) for b in (1, 2)]
    assert logs[0] == logs[1] and logs[0]
    for b in (1, 2):
        code, _, verr = plog(capsys, "verify", str(dd_path / f"broker-{b}"))
        assert code == 0, verr


def test_story_b_with_high_watermark_truncation_reports_divergence_in_json(capsys):
    code, out, _ = plog(capsys, "simulate", DIVERGENCE, "-f", "json", "--truncation", "high-watermark")
    assert code == 3
    doc = json.loads(out)
    assert doc["ok"] is False and doc["data_dir"] is None  # the temporary directory is gone
    assert len(doc["failures"]) == 1 and "expect replicas_identical t-0: broker 1 (" in doc["failures"][0]


def test_keep_names_the_temporary_directory(capsys, tmp_path):
    path = _write(tmp_path, "brokers: 1\ntopics: [{name: t}]\nsteps: [{produce: {topic: t, count: 2}}]\n")
    code, out, err = plog(capsys, "simulate", path, "--keep")
    assert code == 0, err
    kept = Path(err.splitlines()[0].removeprefix("data directory kept at "))
    assert kept.parent == tmp_path and (kept / "cluster.json").is_file()
    assert "  t-0  broker 1*: LEO 2 HW 2 epoch 0 ISR" in out.splitlines()


def test_scenario_from_stdin(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"brokers": 1, "steps": [{"note": "from stdin"}]}'))
    code, out, _ = plog(capsys, "simulate", "-")
    assert code == 0
    assert out.splitlines()[1:] == ["[t=0.0s] step 1: note from stdin", "  from stdin"]


@pytest.mark.parametrize("text, message", [
    ("brokers: 2\nsteps: [{crash: 3}]\n", "plog: error: step 1 (crash): unknown broker 3 (brokers: 1, 2)"),
    ("brokers: 2\nsteps: [{note: x}]\nextra: 1\n", "plog: error: scenario: unknown key 'extra'"),
    ("brokers: 2\nsteps: [\n", "plog: error: scenario is not valid YAML at line"),
])
def test_bad_scenario_is_a_usage_error(capsys, tmp_path, text, message):
    code, out, err = plog(capsys, "simulate", _write(tmp_path, text))
    assert code == 2
    assert out == ""
    assert err.startswith(message) and err.count("\n") == 1
    assert "Traceback" not in err


def test_missing_scenario_file_and_non_empty_data_dir_are_usage_errors(capsys, tmp_path):
    code, _, err = plog(capsys, "simulate", str(tmp_path / "nope.yaml"))
    assert code == 2 and err == f"plog: error: scenario {tmp_path / 'nope.yaml'}: no such file\n"
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "f").write_text("x")
    code, out, err = plog(capsys, "simulate", LOSS, "--data-dir", str(busy))
    assert code == 2 and out == ""
    assert "exists and is not an empty directory" in err
    assert (busy / "f").read_text() == "x"


def test_unexpected_engine_error_exits_1_after_the_timeline(capsys, tmp_path):
    path = _write(tmp_path, "brokers: 1\ntopics: [{name: t}]\nsteps:\n"
                            "  - stop: 1\n  - produce: {topic: t, values: [m0]}\n  - note: not reached\n")
    code, out, err = plog(capsys, "simulate", path)
    assert code == 1
    assert "[t=0.0s] step 2: produce {topic: t, values: [m0]}" in out
    assert "  ERROR: LeaderNotAvailableError: t-0 has no leader" in out
    assert "step 3" not in out
    assert err.startswith("plog: error: step 2 (produce {topic: t, values: [m0]}): LeaderNotAvailableError: ")
    assert err.count("\n") == 1


def test_help_has_an_example_and_the_exit_codes(capsys):
    code, out, _ = plog(capsys, "simulate", "--help")
    assert code == 0
    assert "Example: plog simulate examples/scenarios/leader-epoch-loss.yaml" in out
    assert "- expect: {leader: {t-0: 2}" in out
    assert "3 expectations failed" in out
