"""The scenario runner (engine.simulate): the leader-epoch stories of issue 9 on the real
engine, in both truncation modes, the timeline it records, and strict scenario validation."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from plog.engine.cluster.data_dir import DataDir
from plog.engine.errors import EngineError, LogDirError, ScenarioError
from plog.engine.cluster.scenario import load_scenario, parse_duration_ms
from plog.engine.cluster.simulation import run_scenario
from plog.engine.storage.file_names import TopicPartition

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "scenarios"
T0 = TopicPartition("t", 0)


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch):
    # Durability is not what these tests are about; checkpoints fsync on every write.
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def _run(tmp_path, source, name="dd", **kw):
    sc = source if not isinstance(source, (str, Path, dict)) else load_scenario(source)
    return run_scenario(sc, tmp_path / name, **kw)


def _values_on_disk(dd: DataDir, tp, broker: int) -> list[str]:
    log = dd.open_reader(tp, broker)
    try:
        return [r.value.decode() for r in log.read_records()]
    finally:
        log.close()


def _log_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.glob("*.log")))


def _step(report, index):
    s = report.steps[index - 1]
    assert s.index == index
    return s


def _replica(step, tp, broker):
    part = next(p for p in step.partitions if p.tp == tp)
    return next(r for r in part.replicas if r.broker == broker)


# -- the example scenarios ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["leader-epoch-loss", "leader-epoch-divergence", "unclean-election", "isr-shrink"])
def test_example_scenarios_hold_with_leader_epochs(tmp_path, name):
    report = _run(tmp_path, EXAMPLES / f"{name}.yaml")
    assert report.error is None
    assert report.failures == []
    assert report.ok and report.exit_code == 0
    assert report.truncation == "leader-epoch"
    assert len(report.steps) == len(load_scenario(EXAMPLES / f"{name}.yaml").steps)


def test_story_a_loss_leader_epochs_keep_m1(tmp_path):
    report = _run(tmp_path, EXAMPLES / "leader-epoch-loss.yaml")
    # After the two single fetches: the leader has HW 2, B has m1 but HW 1.
    after_fetches = _step(report, 9)
    a, b = _replica(after_fetches, T0, 1), _replica(after_fetches, T0, 2)
    assert (a.log_end_offset, a.high_watermark, a.leader) == (2, 2, True)
    assert (b.log_end_offset, b.high_watermark, b.leader, b.in_isr) == (2, 1, False, True)
    # B restarts without catching up: nothing truncated (epochs wait for the leader's answer).
    start = _step(report, 13)
    assert not any("truncated" in d for d in start.details)
    assert _replica(start, T0, 2).log_end_offset == 2
    # A is fenced after the session timeout and B, in the ISR, leads with m1.
    advance = _step(report, 15)
    assert advance.time_ms == 10_000
    assert [e.describe() for e in advance.events] == [
        "broker 1: fenced: no heartbeat for 9000 ms",
        "t-0: leader 1 -> 2, epoch 1, ISR [2] (broker 1 fenced)",
    ]
    new_leader = _replica(advance, T0, 2)
    assert (new_leader.leader, new_leader.log_end_offset, new_leader.high_watermark, new_leader.leader_epoch) == \
        (True, 2, 2, 1)
    assert report.acked == {T0: ["m0", "m1"]}
    assert report.acked_lost == {T0: []}
    dd = DataDir.open(tmp_path / "dd")
    assert _values_on_disk(dd, T0, 1) == _values_on_disk(dd, T0, 2) == ["m0", "m1"]
    assert _log_bytes(dd.partition_path(T0, 1)) == _log_bytes(dd.partition_path(T0, 2))


def test_story_a_loss_high_watermark_truncation_loses_m1(tmp_path):
    report = _run(tmp_path, EXAMPLES / "leader-epoch-loss.yaml", truncation="high-watermark")
    assert report.truncation == "high-watermark"
    assert report.error is None and report.exit_code == 3
    start = _step(report, 13)
    assert "t-0: broker 2 truncated 2 -> 1" in " ".join(start.details)
    assert _replica(start, T0, 2).log_end_offset == 1
    assert report.failures == [
        "step 16: expect values t-0: expected [m0, m1], got [m0]",
        "step 16: expect acked_lost t-0: expected [], got [m1] (acknowledged [m0, m1], below the high watermark [m0])",
        "step 18: expect values t-0: expected [m0, m1], got [m0]",
    ]
    assert report.acked_lost == {T0: ["m1"]}
    # Gone for good: A truncated too when it came back as B's follower.
    dd = DataDir.open(tmp_path / "dd")
    assert _values_on_disk(dd, T0, 1) == _values_on_disk(dd, T0, 2) == ["m0"]


def test_story_b_divergence_leader_epochs_truncate_m1(tmp_path):
    report = _run(tmp_path, EXAMPLES / "leader-epoch-divergence.yaml")
    assert report.ok
    shrink = _step(report, 4)
    assert [e.describe() for e in shrink.events] == [
        "t-0: ISR [1,2] -> [1] (replica(s) [2] not caught up for 30000 ms (replica.lag.time.max.ms))"]
    unclean = _step(report, 11)
    assert any(e.kind == "leader" and e.unclean and e.leader == 2 for e in unclean.events)
    back = _step(report, 14)
    assert "t-0: broker 1 truncated 2 -> 1 (leader's end offset for epoch 0 is 1)" in back.details
    dd = DataDir.open(tmp_path / "dd")
    assert _values_on_disk(dd, T0, 1) == _values_on_disk(dd, T0, 2) == ["m0", "m2"]
    assert _log_bytes(dd.partition_path(T0, 1)) == _log_bytes(dd.partition_path(T0, 2))
    # m1 was acknowledged (acks=1) and the unclean election cost it, in both modes.
    assert report.acked_lost == {T0: ["m1"]}


def test_story_b_divergence_high_watermark_truncation_keeps_diverged_replicas(tmp_path):
    report = _run(tmp_path, EXAMPLES / "leader-epoch-divergence.yaml", truncation="high-watermark")
    assert report.exit_code == 3
    assert len(report.failures) == 1
    assert report.failures[0].startswith("step 15: expect replicas_identical t-0: broker 1 (")
    back = _step(report, 14)
    assert not any("truncated" in d for d in back.details)
    # Same offsets, different records: A keeps m1 at offset 1 where B wrote m2.
    assert _replica(back, T0, 1).log_end_offset == _replica(back, T0, 2).log_end_offset == 2
    dd = DataDir.open(tmp_path / "dd")
    assert _values_on_disk(dd, T0, 1) == ["m0", "m1"]
    assert _values_on_disk(dd, T0, 2) == ["m0", "m2"]
    assert _log_bytes(dd.partition_path(T0, 1)) != _log_bytes(dd.partition_path(T0, 2))


# -- step semantics -------------------------------------------------------------------------------

BASE = {"brokers": 2, "topics": [{"name": "t", "replicas": [[1, 2]], "configs": {"min.insync.replicas": 1}}]}


def _scenario(*steps, **top):
    return {**BASE, **top, "steps": list(steps)}


def test_fetch_single_steps_a_paused_follower_and_notes_a_crashed_one(tmp_path):
    report = _run(tmp_path, _scenario(
        {"pause": 2},
        {"produce": {"topic": "t", "count": 3, "acks": 1}},
        {"fetch": {"broker": 2}},
        {"fetch": 2},
        {"crash": 2},
        {"fetch": {"broker": 2}},
        {"fetch": 1},
        {"expect": {"leo": {"t-0@2": 3}}},  # a crashed replica: as on disk
    ))
    assert report.ok, report.failures
    produced = _step(report, 2)
    assert _replica(produced, T0, 2).log_end_offset == 0
    assert _replica(produced, T0, 2).paused
    first = _step(report, 3)
    assert (_replica(first, T0, 2).log_end_offset, _replica(first, T0, 2).high_watermark) == (3, 0)
    assert _replica(first, T0, 1).high_watermark == 0  # the leader learns B's position next time
    assert "t-0: broker 2 fetched offsets 0-2 (1 fetch, " in " ".join(first.details)
    second = _step(report, 4)
    assert _replica(second, T0, 1).high_watermark == 3
    assert _replica(second, T0, 2).high_watermark == 0
    assert _replica(second, T0, 2).paused  # still paused after the single step
    assert _step(report, 6).details == ["broker 2 is crashed: no fetch"]
    assert _replica(_step(report, 6), T0, 2).state == "crashed"
    assert _step(report, 7).details == ["broker 1 follows no partition here: no fetch"]
    assert report.acked == {T0: ["v0", "v1", "v2"]}


def test_produce_keys_and_acks_zero_are_written_but_not_tracked(tmp_path):
    report = _run(tmp_path, _scenario(
        {"produce": {"topic": "t", "values": ["a", "b"], "keys": ["k1", "k2"], "acks": 0}},
        {"produce": {"topic": "t", "values": [1, True, None], "acks": 1}},
        {"consume": {"topic": "t", "as": "seen"}},
        {"expect": {"consumed": {"seen": ["a", "b", "1", "true", None]}, "hw": {"t-0": 5}, "leo": {"t-0@2": 5}}},
    ))
    assert report.ok, report.failures
    assert report.acked == {T0: ["1", "true", None]}
    assert report.consumed == {"seen": ["a", "b", "1", "true", None]}
    log = DataDir.open(tmp_path / "dd").open_reader(T0, 2)
    try:
        assert [r.key for r in log.read_records()][:3] == [b"k1", b"k2", None]
    finally:
        log.close()


def test_expect_error_matches_kafka_names_and_failures_are_recorded(tmp_path):
    report = _run(tmp_path, _scenario(
        {"produce": {"topic": "t", "values": ["m0"], "acks": "all", "expect_error": "NotEnoughReplicas"}},
        {"stop": 2},
        {"produce": {"topic": "t", "values": ["m1"], "acks": "all", "expect_error": "NotEnoughReplicasError"}},
        {"produce": {"topic": "t", "values": ["m2"], "acks": -1, "expect_error": "LeaderNotAvailable"}},
        {"expect": {"leader": {"t-0": 2}, "isr": {"t-0": [1, 2]}, "leader_epoch": {"t-0": 3},
                    "hw": {"t-0": 9}, "values": {"t-0": ["m9"]}, "acked_lost": {"t-0": ["m0"]},
                    "consumed": {"nothing": []}}},
        topics=[{"name": "t", "replicas": [[1, 2]], "configs": {"min.insync.replicas": 2}}],
    ))
    assert report.error is None
    assert report.exit_code == 3
    assert report.failures == [
        "step 1: produce to t-0: expected NotEnoughReplicasError, but it succeeded",
        "step 4: produce to t-0: expected LeaderNotAvailableError, got NotEnoughReplicasError",
        "step 5: expect leader t-0: expected 2, got 1",
        "step 5: expect isr t-0: expected [1, 2], got [1]",
        "step 5: expect leader_epoch t-0: expected 3, got 0",
        "step 5: expect hw t-0: expected 9, got 1",
        "step 5: expect values t-0: expected [m9], got [m0]",
        "step 5: expect acked_lost t-0: expected [m0], got [] (acknowledged [m0], below the high watermark [m0])",
        "step 5: expect consumed nothing: nothing was consumed as 'nothing'",
    ]
    refused = _step(report, 3)
    assert refused.details[0].startswith("t-0: produce failed: NotEnoughReplicasError: The size of the current ISR [1]")
    assert refused.failures == []


def test_unexpected_engine_error_ends_the_run_with_the_timeline_so_far(tmp_path):
    seen = []
    report = _run(tmp_path, _scenario(
        {"produce": {"topic": "t", "values": ["m0"], "acks": 1}},
        {"stop": 1},
        {"stop": 2},
        {"produce": {"topic": "t", "values": ["m1"], "acks": 1}},
        {"note": "never reached"},
    ), on_step=seen.append)
    assert report.exit_code == 1
    assert [s.index for s in report.steps] == [1, 2, 3, 4] == [s.index for s in seen]
    assert report.error.startswith("step 4 (produce {topic: t, values: [m1], acks: 1}): LeaderNotAvailableError: ")
    assert _step(report, 4).error.startswith("LeaderNotAvailableError: t-0 has no leader")
    offline = next(p for p in _step(report, 3).partitions if p.tp == T0)
    assert offline.leader == -1 and offline.isr == (2,)
    assert report.acked_lost == {T0: None}  # no leader to ask at the end


def test_advance_fences_a_crashed_broker_only_after_the_session_timeout(tmp_path):
    report = _run(tmp_path, _scenario(
        {"crash": 1},
        {"advance": "8999ms"},
        {"advance": 1},
        {"expect": {"leader": {"t-0": 2}, "leader_epoch": {"t-0": 1}, "isr": {"t-0": [2]}}},
        {"start": 1},
        {"elect-preferred": {}},
        {"expect": {"leader": {"t-0": 1}, "leader_epoch": {"t-0": 2}, "isr": {"t-0": [1, 2]}}},
        broker_configs={"broker.session.timeout.ms": 9000},
    ))
    assert report.ok, report.failures
    assert _step(report, 2).events == [] and _step(report, 2).time_ms == 8999
    assert [e.describe() for e in _step(report, 3).events][0] == "broker 1: fenced: no heartbeat for 9000 ms"
    assert _step(report, 3).time_ms == 9000
    assert [e.reason for e in _step(report, 6).events] == ["preferred leader election"]


def test_replicate_filters_and_report_json(tmp_path):
    report = _run(tmp_path, {
        "name": "filters", "brokers": [1, 2, 3],
        "topics": [{"name": "a", "partitions": 2, "replication_factor": 3}],
        "steps": [
            {"pause": [2, 3]},
            {"produce": {"topic": "a", "partition": 1, "values": ["x"], "acks": 1}},
            {"resume": [2, 3]},
            {"replicate": {"topic": "a", "partition": 1, "broker": 3}},
            {"expect": {"leo": {"a-1@3": 1, "a-1@2": 0}}},
        ]})
    assert report.ok, report.failures
    bad = _run(tmp_path, {"brokers": 3, "topics": [{"name": "a", "replication_factor": 2}],
                          "steps": [{"expect": {"leo": {"a-0@1": 0, "a-0@2": 0, "a-0@3": 0}}}]}, name="dd2")
    # placed by the engine: one of the three brokers holds no replica, named in the failure
    assert bad.error is None and len(bad.failures) == 1 and "holds no replica of a-0" in bad.failures[0]
    doc = json.loads(json.dumps(report.to_json()))
    assert doc["name"] == "filters" and doc["ok"] is True and doc["error"] is None
    assert [s["kind"] for s in doc["steps"]] == ["pause", "produce", "resume", "replicate", "expect"]
    part = next(p for p in doc["steps"][3]["partitions"] if p["partition"] == 1)
    assert {r["broker"]: r["log_end_offset"] for r in part["replicas"]} == {1: 1, 2: 0, 3: 1}
    # acks=1: acknowledged, but broker 2 (in the ISR) has not fetched it: not below the HW yet
    assert doc["acked"] == {"a-1": ["x"]} and doc["acked_lost"] == {"a-1": ["x"]}


# -- loading and validation -----------------------------------------------------------------------


def test_load_scenario_accepts_yaml_json_paths_and_mappings(tmp_path):
    data = _scenario({"advance": "1.5s"}, {"note": "hi"}, name="n")
    from_json = load_scenario(json.dumps(data))
    path = tmp_path / "s.yaml"
    path.write_text("name: n\nbrokers: 2\ntopics: [{name: t, replicas: [[1, 2]]}]\nsteps:\n"
                    "  - advance: 1.5s\n  - note: hi\n")
    for sc in (from_json, load_scenario(path), load_scenario(str(path)), load_scenario(data)):
        assert sc.name == "n" and sc.brokers == [1, 2]
        assert [(s.index, s.kind, s.args, s.text) for s in sc.steps] == [
            (1, "advance", 1500, "advance 1.5s"), (2, "note", "hi", "note hi")]


def test_a_missing_scenario_file_is_named(tmp_path):
    with pytest.raises(ScenarioError, match=r"^scenario .*nope\.yaml: no such file$"):
        load_scenario(str(tmp_path / "nope.yaml"))
    with pytest.raises(ScenarioError, match=r"^cannot read scenario "):
        load_scenario(tmp_path / "nope.yaml")


@pytest.mark.parametrize("value, ms", [(31, 31), ("31s", 31000), ("500ms", 500), ("2m", 120000), ("1.5s", 1500),
                                       ("250", 250)])
def test_parse_duration(value, ms):
    assert parse_duration_ms(value) == ms


@pytest.mark.parametrize("text, message", [
    ("brokers: 2\nsteps: [{note: x}]\nbogus: 1", "scenario: unknown key 'bogus'"),
    ("steps: [{note: x}]", "scenario: missing key 'brokers'"),
    ("brokers: 2\nsteps: []", "scenario: steps: expected a non-empty list of steps"),
    ("brokers: [1, 3]\nsteps: [{note: x}]", "scenario: brokers: broker ids must be consecutive"),
    ("brokers: 2\ntruncation: sloppy\nsteps: [{note: x}]", "scenario: truncation: expected one of leader-epoch"),
    ("brokers: 2\nbroker_configs: {replica.lag: 1}\nsteps: [{note: x}]",
     "scenario: broker_configs: unknown key 'replica.lag'"),
    ("brokers: 2\nbroker_configs: {replica.lag.time.max.ms: -5}\nsteps: [{note: x}]",
     "scenario: broker_configs: broker config replica.lag.time.max.ms must be a non-negative integer"),
    ("brokers: 2\ntopics: [{name: t, replicas: [[1, 3]]}]\nsteps: [{note: x}]",
     "topic 1: replicas: unknown broker 3"),
    ("brokers: 2\ntopics: [{name: t, replication_factor: 3}]\nsteps: [{note: x}]",
     "topic 1: replication_factor: 3 is larger than the 2 broker(s)"),
    ("brokers: 2\ntopics: [{name: t, configs: {retention.sm: 1}}]\nsteps: [{note: x}]", "topic 1: configs: "),
    ("brokers: 2\ntopics: [{name: t}, {name: t}]\nsteps: [{note: x}]", "topic 2: topic 't' is declared twice"),
    ("brokers: 2\ntopics: [{name: a.b}, {name: a_b}]\nsteps: [{note: x}]", "topic 2: topic 'a_b' collides with 'a.b'"),
    ("brokers: 2\ntopics: [{name: t}]\nsteps: [{note: x}, {jump: 1}]", "step 2: unknown step 'jump'"),
    ("brokers: 2\ntopics: [{name: t}]\nsteps: [{note: x, pause: 1}]", "step 1: expected one of produce"),
    ("brokers: 2\ntopics: [{name: t}]\nsteps: [{produce: {topic: u, values: [a]}}]",
     "step 1 (produce): topic: unknown topic 'u'"),
    ("brokers: 2\ntopics: [{name: t}]\nsteps: [{produce: {topic: t, values: [a], colour: red}}]",
     "step 1 (produce): unknown key 'colour'"),
    ("brokers: 2\ntopics: [{name: t}]\nsteps: [{produce: {topic: t, partition: 1, values: [a]}}]",
     "step 1 (produce): partition: topic 't' has no partition 1 (it has 1)"),
    ("brokers: 2\ntopics: [{name: t}]\nsteps: [{produce: {topic: t, values: [a], count: 2}}]",
     "step 1 (produce): give exactly one of 'values' and 'count'"),
    ("brokers: 2\ntopics: [{name: t}]\nsteps: [{produce: {topic: t, values: [a], acks: 2}}]",
     "step 1 (produce): acks: expected 0, 1, all or -1"),
    ("brokers: 2\ntopics: [{name: t}]\nsteps: [{produce: {topic: t, values: [a], keys: [k, l]}}]",
     "step 1 (produce): keys: 2 key(s) for 1 value(s)"),
    ("brokers: 2\ntopics: [{name: t}]\nsteps: [{produce: {topic: t, values: [a], expect_error: Oops}}]",
     "step 1 (produce): expect_error: unknown error 'Oops'"),
    ("brokers: 2\ntopics: [{name: t}]\nsteps: [{crash: 7}]", "step 1 (crash): unknown broker 7 (brokers: 1, 2)"),
    ("brokers: 2\ntopics: [{name: t}]\nsteps: [{start: {broker: 1, catch_up: maybe}}]",
     "step 1 (start): catch_up: expected true or false"),
    ("brokers: 2\ntopics: [{name: t}]\nsteps: [{advance: soon}]", "step 1 (advance): expected a duration"),
    ("brokers: 2\ntopics: [{name: t}]\nsteps: [{fetch: {topic: t}}]", "step 1 (fetch): missing key 'broker'"),
    ("brokers: 2\ntopics: [{name: t}]\nsteps: [{expect: {leaders: {t-0: 1}}}]",
     "step 1 (expect): unknown key 'leaders'"),
    ("brokers: 2\ntopics: [{name: t}]\nsteps: [{expect: {leader: {t-1: 1}}}]",
     "step 1 (expect): leader: topic 't' has no partition 1"),
    ("brokers: 2\ntopics: [{name: t}]\nsteps: [{expect: {hw: {t0: 1}}}]",
     "step 1 (expect): hw: expected a partition as TOPIC-PARTITION"),
    ("brokers: 2\ntopics: [{name: t, replicas: [[1]]}]\nsteps: [{expect: {leo: {t-0@2: 1}}}]",
     "step 1 (expect): leo: broker 2 holds no replica of t-0"),
    ("brokers: 2\ntopics: [{name: t}]\nsteps: [{expect: {hw: {t-0: -1}}}]", "step 1 (expect): hw: must be at least 0"),
    ("brokers: 2\nsteps: [{note: x}\n", "scenario is not valid YAML at line"),
    ("- just a list", "scenario must be a mapping"),
])
def test_invalid_scenarios_are_one_line_errors_naming_step_and_key(text, message):
    with pytest.raises(ScenarioError) as info:
        load_scenario(text)
    assert isinstance(info.value, EngineError) and info.value.exit_code == 2
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_the_data_directory_must_be_new(tmp_path):
    (tmp_path / "dd").mkdir()
    (tmp_path / "dd" / "x").write_text("mine")
    with pytest.raises(LogDirError):
        _run(tmp_path, _scenario({"note": "x"}))
    assert (tmp_path / "dd" / "x").read_text() == "mine"
