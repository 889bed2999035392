"""The scenarios of ``plog simulate``: what a scripted replication run says, parsed and validated.

A scenario (YAML, or JSON since JSON is YAML) names the brokers, the truncation mode, broker
configs and topics, then lists steps: produce, replicate, single fetch requests, pause/resume
of a follower's fetchers, controlled stop, crash, start, the passing of (virtual) time,
preferred leader election, consume, notes and ``expect`` assertions.
(engine.cluster.simulation plays them on the real engine.)

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
    stop      a controlled shutdown (engine.cluster.brokers.stop_broker).
    crash     the process dies: still in its ISRs until broker.session.timeout.ms.
    start     the broker registers again (engine.cluster.brokers.start_broker); with catch_up
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

A bad scenario is a :class:`ScenarioError` (one line naming the step and the key;
``kind`` "usage": the CLI exits 2).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from plog.engine.errors import EngineError, ScenarioError
from plog.engine.storage.file_names import TopicPartition


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


def error_key(name: str) -> str:
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
            out[error_key(name)] = name
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
        from plog.engine.maintenance.runner import ENGINE_DEFAULTS, engine_settings
        from plog.engine.errors import MaintenanceError

        self._keys("scenario: broker_configs", configs, tuple(sorted(ENGINE_DEFAULTS)))
        out = {str(k): _value_text(v) for k, v in configs.items()}
        try:
            engine_settings(out)
        except MaintenanceError as e:
            self._fail("scenario: broker_configs", str(e))
        return out

    def _topic_spec(self, where: str, t) -> TopicSpec:
        from plog.engine.storage.log_config import LogConfig
        from plog.engine.errors import ConfigError
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
            if not isinstance(expect_error, str) or error_key(expect_error) not in known:
                self._fail(f"{where}: expect_error", f"unknown error {expect_error!r} (e.g. "
                                                     "NotEnoughReplicasError, NotEnoughReplicasAfterAppendError, "
                                                     "LeaderNotAvailableError)")
            expect_error = known[error_key(expect_error)]
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


__all__ = [
    "EXPECT_KEYS",
    "STEP_KINDS",
    "Scenario",
    "ScenarioError",
    "Step",
    "TopicSpec",
    "error_key",
    "load_scenario",
    "parse_duration_ms",
    "yaml_flow",
]
