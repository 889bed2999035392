"""The runner behind ``plog simulate``: a scenario (engine.cluster.scenario) played on the real
engine, a simulated cluster whose every file is real.

:func:`run_scenario` creates a fresh data directory on disk and plays the steps through one
long-lived :class:`~plog.engine.cluster.writer.ClusterWriter` driven by a virtual clock, so
every file is a real Kafka partition folder and every fetch, truncation, election and ISR
change is the engine's own. After each step it records the controller's events and, per
partition and replica, the log end offset, high watermark, latest leader epoch, ISR
membership, leadership and broker state: the timeline ``plog simulate`` prints. What each
step does is engine.cluster.scenario's table.

Errors: an engine error raised by a step that did not expect it ends the run: the report
carries it (``report.error``) with the steps done so far. A bad scenario is a
:class:`~plog.engine.cluster.scenario.ScenarioError`.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from plog.engine.cluster.scenario import TRUNCATION_MODES, Scenario, error_key, yaml_flow
from plog.engine.errors import EngineError, LeaderNotAvailableError, ScenarioError
from plog.engine.storage.file_names import TopicPartition


# -- the report ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaSnapshot:
    broker: int
    #: running, stopped or crashed; ``paused`` for a running broker whose fetchers are paused
    state: str
    fenced: bool
    paused: bool
    leader: bool
    in_isr: bool
    log_end_offset: int | None
    high_watermark: int | None
    leader_epoch: int | None

    def to_json(self) -> dict:
        return {"broker": self.broker, "state": self.state, "fenced": self.fenced, "paused": self.paused,
                "leader": self.leader, "in_isr": self.in_isr, "log_end_offset": self.log_end_offset,
                "high_watermark": self.high_watermark, "leader_epoch": self.leader_epoch}


@dataclass(frozen=True)
class PartitionSnapshot:
    tp: TopicPartition
    leader: int  # -1: offline
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[ReplicaSnapshot, ...]

    def to_json(self) -> dict:
        return {"topic": self.tp.topic, "partition": self.tp.partition, "leader": self.leader,
                "leader_epoch": self.leader_epoch, "isr": list(self.isr), "offline": self.leader < 0,
                "replicas": [r.to_json() for r in self.replicas]}


@dataclass
class StepResult:
    """One step of the timeline: what ran, at which virtual time, what the controller did,
    what the fetchers did (``details``), the state after it, and failed expectations."""

    index: int
    kind: str
    text: str
    time_ms: int
    events: list = field(default_factory=list)  # ControllerEvent
    details: list[str] = field(default_factory=list)
    partitions: list[PartitionSnapshot] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    #: the engine error that ended the run at this step (not an expectation)
    error: str | None = None

    def to_json(self) -> dict:
        return {"step": self.index, "kind": self.kind, "text": self.text, "time_ms": self.time_ms,
                "events": [e.to_json() for e in self.events], "details": list(self.details),
                "partitions": [p.to_json() for p in self.partitions], "failures": list(self.failures),
                "error": self.error}


@dataclass
class SimulationReport:
    name: str | None
    truncation: str
    data_dir: str | None  # None: a temporary directory, removed
    steps: list[StepResult] = field(default_factory=list)
    #: tp -> values acknowledged (acks 1 or all, no error), in order
    acked: dict[TopicPartition, list] = field(default_factory=dict)
    #: consume results by name
    consumed: dict[str, list] = field(default_factory=dict)
    #: tp -> acknowledged values missing below the leader's high watermark at the end
    #: (None: the partition had no leader to ask)
    acked_lost: dict[TopicPartition, list | None] = field(default_factory=dict)
    error: str | None = None

    @property
    def failures(self) -> list[str]:
        return [f"step {s.index}: {f}" for s in self.steps for f in s.failures]

    @property
    def ok(self) -> bool:
        return self.error is None and not self.failures

    @property
    def exit_code(self) -> int:
        """0 ok, 1 an engine error ended the run, 3 expectations failed."""
        return 1 if self.error is not None else 3 if self.failures else 0

    def to_json(self) -> dict:
        return {"name": self.name, "truncation": self.truncation, "data_dir": self.data_dir,
                "steps": [s.to_json() for s in self.steps],
                "acked": {str(tp): v for tp, v in self.acked.items()},
                "acked_lost": {str(tp): v for tp, v in self.acked_lost.items()},
                "consumed": dict(self.consumed), "failures": self.failures, "error": self.error,
                "ok": self.ok}


# -- the runner ----------------------------------------------------------------------------------


class _Clock:
    """Virtual milliseconds: a wall-clock start (so record timestamps and files are
    plausible) plus the scenario's advances."""

    def __init__(self):
        self.start = int(time.time() * 1000)
        self.elapsed = 0

    def __call__(self) -> int:
        return self.start + self.elapsed


def run_scenario(scenario: Scenario, data_dir, on_step: Callable[[StepResult], None] | None = None, *,
                 truncation: str | None = None) -> SimulationReport:
    """Play ``scenario`` in a new data directory at ``data_dir`` (it must not exist or be
    empty; it is left on disk). ``truncation`` overrides the scenario's mode. ``on_step`` is
    called with each :class:`StepResult` as it completes."""
    mode = truncation or scenario.truncation
    if mode not in TRUNCATION_MODES:
        raise ScenarioError(f"truncation must be one of {', '.join(TRUNCATION_MODES)}, not {mode!r}")
    return _Runner(scenario, Path(data_dir), mode, on_step).run()


class _Runner:
    def __init__(self, scenario: Scenario, path: Path, mode: str, on_step):
        self.scenario = scenario
        self.path = path
        self.mode = mode
        self.on_step = on_step
        self.clock = _Clock()
        self.tps = scenario.partitions()
        self.report = SimulationReport(scenario.name, mode, str(path.absolute()))
        self.dd = None
        self.w = None

    # -- setup ----------------------------------------------------------------------------------

    def run(self) -> SimulationReport:
        from plog.engine.cluster.data_dir import DataDir

        s = self.scenario
        self.dd = dd = DataDir.init(self.path, len(s.brokers), first_broker_id=s.brokers[0],
                                    broker_configs=s.broker_configs or None)
        rng = random.Random(0)  # the same placement at every run
        for t in s.topics:
            assignment = None if t.replicas is None else {p: list(r) for p, r in enumerate(t.replicas)}
            dd.create_topic(t.name, None if assignment else t.partitions,
                            None if assignment else t.replication_factor, configs=t.configs,
                            replica_assignment=assignment, rng=rng)
        self.w = dd.writer(clock=self.clock, truncation=self.mode, maintenance=False)
        try:
            for step in s.steps:
                result = StepResult(step.index, step.kind, step.text, 0)
                before = len(self.w.events)
                try:
                    getattr(self, "_" + step.kind.replace("-", "_"))(step.args, result)
                except EngineError as e:
                    result.error = f"{type(e).__name__}: {' '.join(str(e).split())}"
                    self.report.error = f"step {step.index} ({step.text}): {result.error}"
                try:
                    result.partitions = self._snapshot()
                except EngineError as e:
                    if result.error is None:
                        result.error = f"{type(e).__name__}: {' '.join(str(e).split())}"
                        self.report.error = f"step {step.index} ({step.text}): {result.error}"
                result.events = list(self.w.events[before:])
                result.time_ms = self.clock.elapsed
                self.report.steps.append(result)
                if self.on_step is not None:
                    self.on_step(result)
                if result.error is not None:
                    break
            self._final_losses()
        except BaseException:
            try:
                self.w.close()
            except Exception:  # noqa: BLE001  (the first error is the one to report)
                pass
            raise
        try:
            self.w.close()
        except EngineError as e:
            if self.report.error is None:
                self.report.error = f"closing the data directory: {type(e).__name__}: {' '.join(str(e).split())}"
        return self.report

    # -- helpers --------------------------------------------------------------------------------

    def _selected(self, topic=None, partition=None) -> list[TopicPartition]:
        return [tp for tp in self.tps if (topic is None or tp.topic == topic)
                and (partition is None or tp.partition == partition)]

    def _leader(self, tp):
        """(leader log, state), or raises LeaderNotAvailableError."""
        return self.w.leader_log(tp)

    def _below_hw(self, tp) -> list:
        log, _ = self._leader(tp)
        return [None if r.value is None else bytes(r.value).decode("utf-8", "backslashreplace")
                for r in log.read_records(end_offset=log.high_watermark)]

    def _describe_replication(self, report, result: StepResult) -> None:
        for c in report.catch_ups:
            t = c.truncation
            if t is not None and t.removed:
                result.details.append(f"{c.tp}: broker {c.broker} truncated {t.log_end_offset} -> "
                                      f"{t.truncated_to} ({t.reason})")
            if c.records_from is not None:
                span = (f"offset {c.records_from}" if c.records_from == c.records_to
                        else f"offsets {c.records_from}-{c.records_to}")
                result.details.append(f"{c.tp}: broker {c.broker} fetched {span} "
                                      f"({c.fetches} fetch{'es' if c.fetches != 1 else ''}, {c.bytes} bytes)")

    def _replicate_all(self, result: StepResult, tps, brokers=None) -> None:
        for tp in tps:
            try:
                self._describe_replication(self.w.replicate(tp, brokers=brokers), result)
            except LeaderNotAvailableError:
                continue  # offline, or its leader crashed: nothing to fetch from

    # -- steps ----------------------------------------------------------------------------------

    def _produce(self, a, result: StepResult) -> None:
        from plog.formats import compression
        from plog.formats.record_batch import encode_batch

        tp = a["tp"]
        ts = self.clock()
        keys = a["keys"] or [None] * len(a["values"])
        records = [(i, ts, None if k is None else k.encode(), None if v is None else v.encode())
                   for i, (k, v) in enumerate(zip(keys, a["values"]))]
        config = self.dd.topic_config(tp.topic)
        codec = 0 if config.compression_type in ("producer", "uncompressed") else \
            compression.codec_id(config.compression_type)
        raw = encode_batch(records, compression_codec=codec)
        try:
            info = self.w.append(tp, raw, acks=a["acks"])
            result.details.append(f"{tp}: offsets {info.first_offset}-{info.last_offset} written on the leader")
            self._describe_replication(self.w.replicate(tp), result)
            self.w.flush()
        except EngineError as e:
            expected = a["expect_error"]
            name = type(e).__name__
            result.details.append(f"{tp}: produce failed: {name}: {' '.join(str(e).split())}")
            if expected is None:
                raise
            if error_key(name) != error_key(expected):
                result.failures.append(f"produce to {tp}: expected {expected}, got {name}")
            return
        acks = "all" if a["acks"] == -1 else a["acks"]
        result.details.append(f"{tp}: acks={acks}: " + ("sent, no acknowledgement asked" if a["acks"] == 0
                                                        else f"acknowledged {yaml_flow(a['values'])}"))
        if a["acks"] != 0:
            self.report.acked.setdefault(tp, []).extend(a["values"])
        if a["expect_error"] is not None:
            result.failures.append(f"produce to {tp}: expected {a['expect_error']}, but it succeeded")

    def _replicate(self, a, result: StepResult) -> None:
        brokers = None if a["broker"] is None else {a["broker"]}
        self._replicate_all(result, self._selected(a["topic"], a["partition"]), brokers)
        if a["topic"] is None and a["broker"] is None:
            # The writer flush: the high watermarks are checkpointed (what a restart reads).
            self.w.flush()

    def _fetch(self, a, result: StepResult) -> None:
        b = a["broker"]
        broker = self.dd.broker(b)
        if not broker.running:
            result.details.append(f"broker {b} is {broker.state}: no fetch")
            return
        paused = b in self.w.paused
        self.w.paused.discard(b)  # an explicit fetch single-steps a paused follower too
        followed = 0
        try:
            for tp in self._selected(a["topic"], a["partition"]):
                state = self.dd.partition_state(tp)
                if b not in self.dd.replicas(tp) or state.leader == b:
                    continue
                followed += 1
                if state.leader < 0 or not self.dd.broker(state.leader).running:
                    result.details.append(f"{tp}: no leader to fetch from")
                    continue
                before = self.w.replica_log(tp, b).log_end_offset
                report = self.w.replicate(tp, brokers={b}, until_caught_up=False)
                self._describe_replication(report, result)
                if not any(c.records_from is not None for c in report.catch_ups):
                    log = self.w.replica_log(tp, b)
                    result.details.append(f"{tp}: broker {b} fetched nothing new at offset {log.log_end_offset}"
                                          + (f" (was {before})" if before != log.log_end_offset else ""))
        finally:
            if paused:
                self.w.paused.add(b)
        if not followed:
            result.details.append(f"broker {b} follows no partition here: no fetch")

    def _pause(self, brokers, result: StepResult) -> None:
        self.w.paused.update(brokers)

    def _resume(self, brokers, result: StepResult) -> None:
        self.w.paused.difference_update(brokers)

    def _stop(self, broker, result: StepResult, *, crash: bool = False) -> None:
        from plog.engine.cluster.brokers import stop_broker

        change = stop_broker(self.dd, broker, crash=crash, writer=self.w, clock=self.clock)
        if change.offline:
            result.details.append("offline: " + ", ".join(map(str, change.offline)))

    def _crash(self, broker, result: StepResult) -> None:
        self._stop(broker, result, crash=True)

    def _start(self, a, result: StepResult) -> None:
        from plog.engine.cluster.brokers import start_broker

        b = a["broker"]
        change = start_broker(self.dd, b, writer=self.w, clock=self.clock, catch_up=a["catch_up"])
        for t in change.truncations:  # high-watermark mode: at start, as Kafka before KIP-101
            result.details.append(f"{t.tp}: broker {t.broker} truncated {t.log_end_offset} -> {t.truncated_to} "
                                  f"({t.reason})")
        self._describe_replication(change.replication, result)
        if change.offline:
            result.details.append("offline: " + ", ".join(map(str, change.offline)))

    def _advance(self, ms: int, result: StepResult) -> None:
        from plog.engine.cluster.brokers import controller_tick

        self.clock.elapsed += ms
        controller_tick(self.dd, writer=self.w, clock=self.clock)
        self._replicate_all(result, self.tps)
        self.w.flush()

    def _elect_preferred(self, a, result: StepResult) -> None:
        from plog.engine.cluster.brokers import elect_preferred_leaders

        elections, _ = elect_preferred_leaders(self.dd, a["topics"], writer=self.w, clock=self.clock)
        for e in elections:
            if not e.elected:
                result.details.append(f"{e.tp}: {e.message}")

    def _consume(self, a, result: StepResult) -> None:
        tp = a["tp"]
        values = self._below_hw(tp)
        self.report.consumed[a["as"]] = values
        log, _ = self._leader(tp)
        result.details.append(f"{tp}: consumed {yaml_flow(values)} below the high watermark "
                              f"{log.high_watermark} (as {a['as']})")

    def _note(self, text, result: StepResult) -> None:
        result.details.append(text)

    def _expect(self, checks, result: StepResult) -> None:
        fail = result.failures.append
        for key, wanted in checks.items():
            if key == "replicas_identical":
                for tp in wanted:
                    problem = self._replicas_differ(tp)
                    if problem:
                        fail(f"expect replicas_identical {tp}: {problem}")
                continue
            if key == "leo":
                for (tp, b), n in wanted.items():
                    if b not in self.dd.replicas(tp):
                        fail(f"expect leo {tp}@{b}: broker {b} holds no replica of {tp} "
                             f"(replicas: {self.dd.replicas(tp)})")
                        continue
                    got = self._replica_leo(tp, b)
                    if got != n:
                        fail(f"expect leo {tp}@{b}: expected {n}, got {got}")
                continue
            if key == "consumed":
                for name, values in wanted.items():
                    got = self.report.consumed.get(name)
                    if got is None:
                        fail(f"expect consumed {name}: nothing was consumed as {name!r}")
                    elif got != values:
                        fail(f"expect consumed {name}: expected {yaml_flow(values)}, got {yaml_flow(got)}")
                continue
            for tp, x in wanted.items():
                state = self.dd.partition_state(tp)
                if key == "leader":
                    if state.leader != x:
                        fail(f"expect leader {tp}: expected {_leader_text(x)}, got {_leader_text(state.leader)}")
                elif key == "isr":
                    if sorted(state.isr) != x:
                        fail(f"expect isr {tp}: expected {x}, got {sorted(state.isr)}")
                elif key == "leader_epoch":
                    if state.leader_epoch != x:
                        fail(f"expect leader_epoch {tp}: expected {x}, got {state.leader_epoch}")
                else:
                    try:
                        log, _ = self._leader(tp)
                        below = self._below_hw(tp)
                    except LeaderNotAvailableError as e:
                        fail(f"expect {key} {tp}: no leader to ask ({' '.join(str(e).split())})")
                        continue
                    if key == "hw" and log.high_watermark != x:
                        fail(f"expect hw {tp}: expected {x}, got {log.high_watermark}")
                    elif key == "values" and below != x:
                        fail(f"expect values {tp}: expected {yaml_flow(x)}, got {yaml_flow(below)}")
                    elif key == "acked_lost":
                        lost = _lost(self.report.acked.get(tp, []), below)
                        if Counter(lost) != Counter(x):
                            fail(f"expect acked_lost {tp}: expected {yaml_flow(x)}, got {yaml_flow(lost)} "
                                 f"(acknowledged {yaml_flow(self.report.acked.get(tp, []))}, "
                                 f"below the high watermark {yaml_flow(below)})")

    def _replica_leo(self, tp, broker: int) -> int | None:
        """The log end offset of a replica: in memory on a running broker, on disk (as a
        restart will find it) on a stopped or crashed one."""
        if self.dd.broker(broker).running:
            return self.w.replica_log(tp, broker).log_end_offset
        try:
            log = self.dd.open_reader(tp, broker)
        except EngineError:
            return None
        try:
            return log.log_end_offset
        finally:
            log.close()

    def _replicas_differ(self, tp) -> str | None:
        """None when every running replica's log holds the same batch bytes."""
        contents = {}
        for b in self.dd.replicas(tp):
            if not self.dd.broker(b).running:
                continue
            log = self.w.replica_log(tp, b)
            contents[b] = b"".join(seg.read_bytes(0, seg.size) for seg in log.segments)
        if len(contents) < 2:
            return f"fewer than two running replicas ({', '.join(map(str, contents)) or 'none'})"
        first_b, first = next(iter(contents.items()))
        for b, data in contents.items():
            if data != first:
                leo = {x: self.w.replica_log(tp, x).log_end_offset for x in contents}
                where = _first_difference(first, data)
                return (f"broker {first_b} ({len(first)} bytes, LEO {leo[first_b]}) and broker {b} "
                        f"({len(data)} bytes, LEO {leo[b]}) differ from byte {where}")
        return None

    def _final_losses(self) -> None:
        for tp, acked in self.report.acked.items():
            try:
                self.report.acked_lost[tp] = _lost(acked, self._below_hw(tp))
            except LeaderNotAvailableError:
                self.report.acked_lost[tp] = None

    # -- state ------------------------------------------------------------------------------------

    def _snapshot(self) -> list[PartitionSnapshot]:
        out = []
        dd = self.dd
        for tp in self.tps:
            state = dd.partition_state(tp)
            reps = []
            for b in dd.replicas(tp):
                broker = dd.broker(b)
                leo = hw = epoch = None
                try:
                    if broker.running:
                        log = self.w.replica_log(tp, b)
                        leo, hw, epoch = log.log_end_offset, log.high_watermark, log.epoch_cache.latest_epoch
                    else:
                        # A stopped or crashed broker: its files as a restart will find them.
                        log = dd.open_reader(tp, b)
                        try:
                            leo, hw, epoch = log.log_end_offset, log.high_watermark, log.epoch_cache.latest_epoch
                        finally:
                            log.close()
                except EngineError:
                    pass  # no folder to read (never created): the row shows no offsets
                reps.append(ReplicaSnapshot(b, broker.state, broker.fenced, broker.running and b in self.w.paused,
                                            state.leader == b, b in state.isr, leo, hw, epoch))
            out.append(PartitionSnapshot(tp, state.leader, state.leader_epoch, tuple(state.isr), tuple(reps)))
        return out


def _leader_text(leader: int) -> str:
    return "none (offline)" if leader < 0 else str(leader)


def _lost(acked: list, present: list) -> list:
    """Acknowledged values missing from ``present`` (a multiset difference, in acked order)."""
    left = Counter(present)
    out = []
    for v in acked:
        if left[v] > 0:
            left[v] -= 1
        else:
            out.append(v)
    return out


def _first_difference(a: bytes, b: bytes) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def report_json(report: SimulationReport) -> str:
    return json.dumps(report.to_json(), indent=2, ensure_ascii=False)


__all__ = [
    "PartitionSnapshot",
    "ReplicaSnapshot",
    "SimulationReport",
    "StepResult",
    "report_json",
    "run_scenario",
]
