"""The scenario runner behind ``plog simulate``: scripted replication runs on the real engine.

A scenario (YAML, or JSON since JSON is YAML) names the brokers, the truncation mode, broker
configs and topics, then lists steps: produce, replicate, single fetch requests, pause/resume
of a follower's fetchers, controlled stop, crash, start, the passing of (virtual) time,
preferred leader election, consume, notes and ``expect`` assertions. :func:`run_scenario`
creates a fresh data directory on disk and plays the steps through one long-lived
:class:`~plog.engine.cluster.data_dir.ClusterWriter` driven by a virtual clock, so every file is a real
Kafka partition folder and every fetch, truncation, election and ISR change is the engine's
own. After each step it records the controller's events and, per partition and replica, the
log end offset, high watermark, latest leader epoch, ISR membership, leadership and broker
state: the timeline ``plog simulate`` prints.

What each step does (``w`` is the writer, ``dd`` the data directory)::

    produce   one batch appended to the leader (w.append with acks), then the followers
              that are running and not paused fetch (w.replicate) and w.flush() checks acks,
              writes the high-watermark checkpoints. A produce that raised nothing with
              acks 1 or all is "acknowledged" (tracked for expect acked_lost).
    replicate every running, unpaused follower catches up (filters: topic, partition,
              broker); without filters the writer flushes after (checkpoints).
    fetch     ONE fetch request of every follower replica on a broker (even a paused one:
              it is how a paused follower is single-stepped); the first fetch after a
              (re)start or a leader change truncates first, as the engine's fetcher does.
              No flush: the high watermarks it moved are not checkpointed yet.
    pause     the broker's fetchers stop (a slow follower); resume starts them again.
    stop      a controlled shutdown (engine.brokers.stop_broker).
    crash     the process dies: still in its ISRs until broker.session.timeout.ms.
    start     the broker registers again (engine.brokers.start_broker); with catch_up
              (default) its followers truncate and catch up. In high-watermark mode a
              follower truncates to its own high watermark at start even without catch_up
              (the engine does it, as Kafka did before KIP-101); with leader epochs the
              truncation waits for its first fetch.
    advance   the virtual clock moves; the controller ticks (fences timed-out brokers,
              elects), the running unpaused followers fetch until caught up, the leaders
              shrink their ISRs by replica.lag.time.max.ms, the writer flushes.
    elect-preferred  preferred leader election (topics: optional list).
    consume   the records below the leader's high watermark, stored under a name.
    expect    assertions (see :data:`EXPECT_KEYS`); failures are recorded, the run goes on.
    note      free text shown in the timeline.

Errors: a bad scenario is a :class:`ScenarioError` (one line naming the step and key;
``exit_code`` 2, a usage error). An engine error raised by a step that did not expect it
ends the run: the report carries it (``report.error``) with the steps done so far.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from plog.engine.errors import EngineError, LeaderNotAvailableError
from plog.engine.storage.file_names import TopicPartition


class ScenarioError(EngineError):
    """A scenario file that is not valid: a one-line message naming the step and the key."""

    exit_code = 2  # a usage error for the CLI


STEP_KINDS = ("produce", "replicate", "fetch", "pause", "resume", "stop", "crash", "start", "advance",
              "elect-preferred", "consume", "expect", "note")
EXPECT_KEYS = ("leader", "isr", "leader_epoch", "hw", "leo", "values", "replicas_identical", "acked_lost",
               "consumed")
TOP_KEYS = ("name", "brokers", "truncation", "broker_configs", "topics", "steps")
TRUNCATION_MODES = ("leader-epoch", "high-watermark")


# -- the scenario ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicSpec:
    name: str
    #: replicas[p]: partition p's replicas (preferred leader first); None: placed by the engine
    replicas: list[list[int]] | None
    partitions: int
    replication_factor: int
    configs: dict[str, str]


@dataclass(frozen=True)
class Step:
    """One validated step: ``index`` (1-based), ``kind``, normalised ``args``, ``text`` as written."""

    index: int
    kind: str
    args: Any
    text: str


@dataclass
class Scenario:
    name: str | None
    brokers: list[int]
    truncation: str
    broker_configs: dict[str, str]
    topics: list[TopicSpec]
    steps: list[Step]

    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t.name, p) for t in self.topics for p in range(t.partitions)]


def load_scenario(source) -> Scenario:
    """Parse and validate a scenario: YAML/JSON text, a path (``os.PathLike``, or a one-line
    string naming an existing file) or an already parsed mapping. Raises :class:`ScenarioError`."""
    if isinstance(source, Mapping):
        data = source
    else:
        if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source
                                               and source.strip() and Path(source).is_file()):
            path = Path(source)
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as e:
                raise ScenarioError(f"cannot read scenario {path}: {e.strerror or e}") from None
            except UnicodeDecodeError:
                raise ScenarioError(f"scenario {path} is not UTF-8 text") from None
        else:
            text = str(source)
            if "\n" not in text and text.strip().lower().endswith((".yaml", ".yml", ".json")):
                raise ScenarioError(f"scenario {text.strip()}: no such file")
        data = _parse_yaml(text)
    return _Validator().scenario(data)


def _parse_yaml(text: str):
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ScenarioError(f"scenario is not valid YAML{where}: {' '.join(str(problem).split())}") from None
    if not isinstance(data, Mapping):
        raise ScenarioError("scenario must be a mapping with 'brokers', 'topics' and 'steps'")
    return data


def yaml_flow(value) -> str:
    import yaml

    if isinstance(value, (Mapping, list)):
        return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=1 << 16).strip()
    return "" if value is None else str(value)


def parse_duration_ms(value) -> int:
    """``31s``, ``500ms``, ``2m``, ``1.5s`` or a bare number of milliseconds."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        ms = value
    elif isinstance(value, float):
        ms = int(round(value))
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*", str(value))
        if m is None:
            raise ValueError(value)
        ms = int(round(float(m.group(1)) * {None: 1, "ms": 1, "s": 1000, "m": 60000}[m.group(2)]))
    if ms < 0:
        raise ValueError(value)
    return ms


def _value_text(v) -> str | None:
    """A scalar from the scenario as the record value/key text it stands for."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _error_key(name: str) -> str:
    key = name.replace("_", "").lower()
    for suffix in ("exception", "error"):
        if key.endswith(suffix):
            key = key[: -len(suffix)]
    return key


def _engine_error_names() -> dict[str, str]:
    from plog.engine import errors

    out = {}
    for name in dir(errors):
        obj = getattr(errors, name)
        if isinstance(obj, type) and issubclass(obj, EngineError) and obj is not EngineError:
            out[_error_key(name)] = name
    return out


class _Validator:
    def __init__(self):
        self.brokers: list[int] = []
        self.topics: dict[str, TopicSpec] = {}

    # -- helpers --------------------------------------------------------------------------------

    @staticmethod
    def _fail(where: str, message: str):
        raise ScenarioError(f"{where}: {message}")

    def _keys(self, where: str, mapping, allowed, required=()) -> None:
        if not isinstance(mapping, Mapping):
            self._fail(where, f"expected a mapping, got {yaml_flow(mapping)!r}")
        for k in mapping:
            if k not in allowed:
                self._fail(where, f"unknown key {k!r} (known: {', '.join(allowed)})")
        for k in required:
            if k not in mapping:
                self._fail(where, f"missing key {k!r}")

    def _int(self, where: str, value, *, minimum: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self._fail(where, f"expected an integer, got {yaml_flow(value)!r}")
        if minimum is not None and value < minimum:
            self._fail(where, f"must be at least {minimum}, not {value}")
        return value

    def _broker(self, where: str, value) -> int:
        b = self._int(where, value)
        if b not in self.brokers:
            self._fail(where, f"unknown broker {b} (brokers: {', '.join(map(str, self.brokers))})")
        return b

    def _brokers(self, where: str, value) -> list[int]:
        if isinstance(value, list):
            if not value:
                self._fail(where, "expected at least one broker id")
            return [self._broker(where, v) for v in value]
        return [self._broker(where, value)]

    def _topic(self, where: str, value) -> str:
        if not isinstance(value, str) or value not in self.topics:
            self._fail(where, f"unknown topic {value!r} (topics: {', '.join(self.topics) or 'none'})")
        return value

    def _partition(self, where: str, topic: str, value) -> int:
        p = self._int(where, value)
        n = self.topics[topic].partitions
        if not 0 <= p < n:
            self._fail(where, f"topic {topic!r} has no partition {p} (it has {n})")
        return p

    def _tp_name(self, where: str, text) -> TopicPartition:
        """``t-0`` -> TopicPartition('t', 0)."""
        if isinstance(text, str):
            topic, sep, part = text.rpartition("-")
            if sep and part.isdigit() and topic in self.topics:
                return TopicPartition(topic, self._partition(where, topic, int(part)))
        self._fail(where, f"expected a partition as TOPIC-PARTITION naming a scenario topic (e.g. "
                          f"{next(iter(self.topics), 't')}-0), got {text!r}")

    def _replica_name(self, where: str, text) -> tuple[TopicPartition, int]:
        """``t-0@2`` -> (TopicPartition('t', 0), 2)."""
        if not isinstance(text, str) or "@" not in text:
            self._fail(where, f"expected a replica as TOPIC-PARTITION@BROKER (e.g. t-0@1), got {text!r}")
        name, _, broker = text.rpartition("@")
        tp = self._tp_name(where, name)
        if not broker.isdigit():
            self._fail(where, f"expected a broker id after '@', got {text!r}")
        b = int(broker)
        replicas = self._replicas_of(tp)
        if replicas is not None and b not in replicas:
            self._fail(where, f"broker {b} holds no replica of {tp} (replicas: {replicas})")
        if b not in self.brokers:
            self._fail(where, f"unknown broker {b}")
        return tp, b

    def _replicas_of(self, tp: TopicPartition) -> list[int] | None:
        spec = self.topics[tp.topic]
        return None if spec.replicas is None else spec.replicas[tp.partition]

    def _values(self, where: str, value) -> list[str | None]:
        if not isinstance(value, list):
            self._fail(where, f"expected a list of values, got {yaml_flow(value)!r}")
        for v in value:
            if isinstance(v, (Mapping, list)):
                self._fail(where, f"values must be scalars, got {yaml_flow(v)!r}")
        return [_value_text(v) for v in value]

    # -- top level --------------------------------------------------------------------------------

    def scenario(self, data) -> Scenario:
        from plog.engine.storage.file_names import has_collision

        self._keys("scenario", data, TOP_KEYS, required=("brokers", "steps"))
        name = data.get("name")
        if name is not None and not isinstance(name, str):
            self._fail("scenario: name", "expected a string")
        brokers = data["brokers"]
        if isinstance(brokers, list):
            if not brokers:
                self._fail("scenario: brokers", "expected at least one broker id")
            ids = [self._int("scenario: brokers", b, minimum=0) for b in brokers]
            if ids != list(range(ids[0], ids[0] + len(ids))):
                self._fail("scenario: brokers", f"broker ids must be consecutive and ascending, not {ids}")
        else:
            ids = list(range(1, 1 + self._int("scenario: brokers", brokers, minimum=1)))
        if len(ids) > 100:
            self._fail("scenario: brokers", f"at most 100 brokers, not {len(ids)}")
        self.brokers = ids
        truncation = data.get("truncation", "leader-epoch")
        if truncation not in TRUNCATION_MODES:
            self._fail("scenario: truncation", f"expected one of {', '.join(TRUNCATION_MODES)}, not {truncation!r}")
        broker_configs = self._broker_configs(data.get("broker_configs") or {})
        topics = data.get("topics") or []
        if not isinstance(topics, list):
            self._fail("scenario: topics", "expected a list of topics")
        for i, t in enumerate(topics, 1):
            spec = self._topic_spec(f"topic {i}", t)
            if spec.name in self.topics:
                self._fail(f"topic {i}", f"topic {spec.name!r} is declared twice")
            for other in self.topics:
                if has_collision(spec.name, other):
                    self._fail(f"topic {i}", f"topic {spec.name!r} collides with {other!r} "
                                             "(Kafka treats '.' and '_' alike)")
            self.topics[spec.name] = spec
        steps = data["steps"]
        if not isinstance(steps, list) or not steps:
            self._fail("scenario: steps", "expected a non-empty list of steps")
        return Scenario(name, ids, truncation, broker_configs, list(self.topics.values()),
                        [self.step(i, s) for i, s in enumerate(steps, 1)])

    def _broker_configs(self, configs) -> dict[str, str]:
        from plog.engine.maintenance.runner import ENGINE_DEFAULTS, MaintenanceError, engine_settings

        self._keys("scenario: broker_configs", configs, tuple(sorted(ENGINE_DEFAULTS)))
        out = {str(k): _value_text(v) for k, v in configs.items()}
        try:
            engine_settings(out)
        except MaintenanceError as e:
            self._fail("scenario: broker_configs", str(e))
        return out

    def _topic_spec(self, where: str, t) -> TopicSpec:
        from plog.engine.storage.log_config import ConfigError, LogConfig
        from plog.engine.storage.file_names import validate_topic_name

        self._keys(where, t, ("name", "replicas", "partitions", "replication_factor", "configs"), required=("name",))
        name = t["name"]
        if not isinstance(name, str):
            self._fail(f"{where}: name", "expected a string")
        try:
            validate_topic_name(name)
        except EngineError as e:
            self._fail(f"{where}: name", str(e))
        configs = t.get("configs") or {}
        if not isinstance(configs, Mapping):
            self._fail(f"{where}: configs", "expected a mapping")
        configs = {str(k): _value_text(v) for k, v in configs.items()}
        try:
            LogConfig.from_properties(configs)
        except ConfigError as e:
            self._fail(f"{where}: configs", " ".join(str(e).split()))
        replicas = t.get("replicas")
        if replicas is not None:
            if "partitions" in t or "replication_factor" in t:
                self._fail(where, "give either replicas or partitions/replication_factor")
            if not isinstance(replicas, list) or not replicas or not all(isinstance(r, list) and r for r in replicas):
                self._fail(f"{where}: replicas", "expected a list of replica lists, e.g. [[1, 2]]")
            for r in replicas:
                for b in r:
                    self._broker(f"{where}: replicas", b)
                if len(set(r)) != len(r):
                    self._fail(f"{where}: replicas", f"a broker is named twice in {r}")
                if len(r) != len(replicas[0]):
                    self._fail(f"{where}: replicas", "every partition needs the same number of replicas")
            return TopicSpec(name, [list(r) for r in replicas], len(replicas), len(replicas[0]), configs)
        partitions = self._int(f"{where}: partitions", t.get("partitions", 1), minimum=1)
        rf = self._int(f"{where}: replication_factor", t.get("replication_factor", 1), minimum=1)
        if rf > len(self.brokers):
            self._fail(f"{where}: replication_factor", f"{rf} is larger than the {len(self.brokers)} broker(s)")
        return TopicSpec(name, None, partitions, rf, configs)

    # -- steps --------------------------------------------------------------------------------------

    def step(self, i: int, raw) -> Step:
        where = f"step {i}"
        if not isinstance(raw, Mapping) or len(raw) != 1:
            self._fail(where, f"expected one of {', '.join(STEP_KINDS)} as the step's only key, "
                              f"got {yaml_flow(raw)!r}")
        (kind, value), = raw.items()
        if kind not in STEP_KINDS:
            self._fail(where, f"unknown step {kind!r} (known: {', '.join(STEP_KINDS)})")
        where = f"step {i} ({kind})"
        args = getattr(self, "_" + kind.replace("-", "_"))(where, value)
        text = f"{kind} {yaml_flow(value)}".rstrip()
        return Step(i, kind, args, text)

    def _produce(self, where, v):
        self._keys(where, v, ("topic", "partition", "values", "count", "keys", "acks", "expect_error"),
                   required=("topic",))
        topic = self._topic(f"{where}: topic", v["topic"])
        tp = TopicPartition(topic, self._partition(f"{where}: partition", topic, v.get("partition", 0)))
        if ("values" in v) == ("count" in v):
            self._fail(where, "give exactly one of 'values' and 'count'")
        if "values" in v:
            values = self._values(f"{where}: values", v["values"])
            if not values:
                self._fail(f"{where}: values", "expected at least one value")
        else:
            n = self._int(f"{where}: count", v["count"], minimum=1)
            if n > 100_000:
                self._fail(f"{where}: count", f"at most 100000, not {n}")
            values = [f"v{j}" for j in range(n)]
        keys = None
        if "keys" in v:
            keys = self._values(f"{where}: keys", v["keys"])
            if len(keys) != len(values):
                self._fail(f"{where}: keys", f"{len(keys)} key(s) for {len(values)} value(s)")
        acks = v.get("acks", "all")
        if str(acks) not in ("0", "1", "-1", "all") or isinstance(acks, bool):
            self._fail(f"{where}: acks", f"expected 0, 1, all or -1, not {acks!r}")
        expect_error = v.get("expect_error")
        if expect_error is not None:
            known = _engine_error_names()
            if not isinstance(expect_error, str) or _error_key(expect_error) not in known:
                self._fail(f"{where}: expect_error", f"unknown error {expect_error!r} (e.g. "
                                                     "NotEnoughReplicasError, NotEnoughReplicasAfterAppendError, "
                                                     "LeaderNotAvailableError)")
            expect_error = known[_error_key(expect_error)]
        return {"tp": tp, "values": values, "keys": keys, "acks": -1 if str(acks) in ("all", "-1") else int(acks),
                "expect_error": expect_error}

    def _filters(self, where, v, allowed=("topic", "partition", "broker"), required=()):
        v = {} if v is None else v
        self._keys(where, v, allowed, required=required)
        out = {"topic": None, "partition": None, "broker": None}
        if "topic" in v:
            out["topic"] = self._topic(f"{where}: topic", v["topic"])
        if "partition" in v:
            if out["topic"] is None:
                self._fail(f"{where}: partition", "needs a topic")
            out["partition"] = self._partition(f"{where}: partition", out["topic"], v["partition"])
        if "broker" in v:
            out["broker"] = self._broker(f"{where}: broker", v["broker"])
        return out

    def _replicate(self, where, v):
        return self._filters(where, v)

    def _fetch(self, where, v):
        if not isinstance(v, Mapping):
            v = {"broker": v}
        return self._filters(where, v, required=("broker",))

    def _pause(self, where, v):
        return self._brokers(where, v)

    _resume = _pause

    def _stop(self, where, v):
        return self._broker(where, v)

    _crash = _stop

    def _start(self, where, v):
        if not isinstance(v, Mapping):
            return {"broker": self._broker(where, v), "catch_up": True}
        self._keys(where, v, ("broker", "catch_up"), required=("broker",))
        catch_up = v.get("catch_up", True)
        if not isinstance(catch_up, bool):
            self._fail(f"{where}: catch_up", f"expected true or false, not {catch_up!r}")
        return {"broker": self._broker(f"{where}: broker", v["broker"]), "catch_up": catch_up}

    def _advance(self, where, v):
        try:
            return parse_duration_ms(v)
        except ValueError:
            self._fail(where, f"expected a duration such as 31s, 500ms, 2m or a number of ms, not {v!r}")

    def _elect_preferred(self, where, v):
        v = {} if v is None else v
        self._keys(where, v, ("topics",))
        topics = v.get("topics")
        if topics is not None:
            if not isinstance(topics, list):
                topics = [topics]
            topics = [self._topic(f"{where}: topics", t) for t in topics]
        return {"topics": topics}

    def _consume(self, where, v):
        self._keys(where, v, ("topic", "partition", "as"), required=("topic",))
        topic = self._topic(f"{where}: topic", v["topic"])
        tp = TopicPartition(topic, self._partition(f"{where}: partition", topic, v.get("partition", 0)))
        name = v.get("as", str(tp))
        if not isinstance(name, str) or not name:
            self._fail(f"{where}: as", "expected a name")
        return {"tp": tp, "as": name}

    def _note(self, where, v):
        if isinstance(v, (Mapping, list)):
            self._fail(where, "expected text")
        return "" if v is None else str(v)

    def _expect(self, where, v):
        self._keys(where, v, EXPECT_KEYS)
        out: dict[str, Any] = {}
        for key, value in v.items():
            w = f"{where}: {key}"
            if key == "replicas_identical":
                names = value if isinstance(value, list) else [value]
                out[key] = [self._tp_name(w, n) for n in names]
                continue
            if not isinstance(value, Mapping) or not value:
                self._fail(w, f"expected a non-empty mapping, got {yaml_flow(value)!r}")
            if key == "leo":
                out[key] = {self._replica_name(w, n): self._int(w, x, minimum=0) for n, x in value.items()}
            elif key == "consumed":
                out[key] = {str(n): self._values(w, x) for n, x in value.items()}
            else:
                checked = {}
                for n, x in value.items():
                    tp = self._tp_name(w, n)
                    if key == "leader":
                        if x is None or x == -1:
                            x = -1
                        else:
                            x = self._broker(w, x)
                    elif key == "isr":
                        x = sorted(self._brokers(w, x))
                    elif key in ("leader_epoch", "hw"):
                        x = self._int(w, x, minimum=0)
                    else:  # values, acked_lost
                        x = self._values(w, x)
                    checked[tp] = x
                out[key] = checked
        return out


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
            if _error_key(name) != _error_key(expected):
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
    "EXPECT_KEYS",
    "PartitionSnapshot",
    "ReplicaSnapshot",
    "STEP_KINDS",
    "Scenario",
    "ScenarioError",
    "SimulationReport",
    "Step",
    "StepResult",
    "TopicSpec",
    "load_scenario",
    "parse_duration_ms",
    "report_json",
    "yaml_flow",
    "run_scenario",
]
