"""Topic-level log configuration, with Kafka's names and defaults (``LogConfig``).

:class:`LogConfig` holds the settings the storage engine reads, under Kafka's topic
config names (``segment.bytes``, ``flush.messages`` ...). Values come from
``LogConfig.from_properties({"segment.bytes": "1048576", ...})`` and go back with
``to_properties()``, which writes only what differs from the defaults.

One setting is plog's own: ``plog.fsync.on.produce`` (default ``true``). Kafka relies on
replication for durability and leaves ``flush.messages``/``flush.ms`` at "never"; an
embedded log has no replicas, so by default plog fsyncs the segment before an append
returns, and an acknowledged record survives a crash of the process or the machine.
Set it to ``false`` to get Kafka's behaviour (the page cache and the flush settings).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Mapping

from plog.engine.errors import ConfigError

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True)
class LogConfig:
    """Settings of one partition log. Field docs give the Kafka name and default."""

    segment_bytes: int = 1 << 30  # segment.bytes (topic minimum 14)
    segment_ms: int = 7 * 24 * 3600 * 1000  # segment.ms
    segment_jitter_ms: int = 0  # segment.jitter.ms
    segment_index_bytes: int = 10 * 1024 * 1024  # segment.index.bytes
    index_interval_bytes: int = 4096  # index.interval.bytes
    max_message_bytes: int = 1024 * 1024 + 12  # max.message.bytes
    message_timestamp_type: str = CREATE_TIME  # message.timestamp.type
    flush_messages: int = LONG_MAX  # flush.messages
    flush_ms: int = LONG_MAX  # flush.ms
    retention_ms: int = 7 * 24 * 3600 * 1000  # retention.ms (-1 = infinite)
    retention_bytes: int = -1  # retention.bytes (-1 = infinite)
    cleanup_policy: str = "delete"  # cleanup.policy: delete, compact or "compact,delete"
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    delete_retention_ms: int = 24 * 3600 * 1000  # delete.retention.ms
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = LONG_MAX  # max.compaction.lag.ms
    file_delete_delay_ms: int = 60000  # file.delete.delay.ms
    preallocate: bool = False  # preallocate
    compression_type: str = "producer"  # compression.type
    min_insync_replicas: int = 1  # min.insync.replicas
    unclean_leader_election_enable: bool = False  # unclean.leader.election.enable
    fsync_on_produce: bool = True  # plog.fsync.on.produce (plog's own; see module docstring)

    def __post_init__(self) -> None:
        if self.segment_bytes < 14:
            raise ConfigError(f"segment.bytes must be at least 14, not {self.segment_bytes}")
        if self.segment_index_bytes < 4:
            raise ConfigError(f"segment.index.bytes must be at least 4, not {self.segment_index_bytes}")
        if self.index_interval_bytes < 0:
            raise ConfigError("index.interval.bytes must be >= 0")
        if self.message_timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ConfigError(f"message.timestamp.type must be CreateTime or LogAppendTime, "
                              f"not {self.message_timestamp_type}")
        if self.segment_ms < 1 or self.segment_jitter_ms < 0:
            raise ConfigError("segment.ms must be >= 1 and segment.jitter.ms >= 0")
        policies = set(self.cleanup_policy.replace(" ", "").split(","))
        if not policies <= {"delete", "compact"} or not policies:
            raise ConfigError(f"cleanup.policy must be delete, compact or both, not {self.cleanup_policy}")
        if self.compression_type not in ("producer", "uncompressed", "none", "gzip", "snappy", "lz4", "zstd"):
            raise ConfigError(f"unknown compression.type {self.compression_type}")
        if self.min_insync_replicas < 1:
            raise ConfigError(f"min.insync.replicas must be at least 1, not {self.min_insync_replicas}")

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """``segment.ms``, or ``min(max.compaction.lag.ms, segment.ms)`` for compacted logs."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    # -- Kafka property names -------------------------------------------------------

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], base: "LogConfig | None" = None) -> "LogConfig":
        """Build from Kafka-named properties (strings or native values) over ``base``."""
        changes = {}
        for name, raw in props.items():
            field = _BY_KAFKA_NAME.get(name)
            if field is None:
                raise ConfigError(f"unknown topic config {name!r}")
            changes[field.name] = _coerce(name, field.type, raw)
        return replace(base or cls(), **changes)

    def to_properties(self, *, all_values: bool = False) -> dict[str, str]:
        """Kafka-named properties as strings: the non-default ones, or all."""
        default = LogConfig()
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if all_values or value != getattr(default, f.name):
                out[kafka_name(f.name)] = _render(value)
        return out


def kafka_name(field_name: str) -> str:
    if field_name == "fsync_on_produce":
        return "plog.fsync.on.produce"
    return field_name.replace("_", ".")


_BY_KAFKA_NAME = {kafka_name(f.name): f for f in fields(LogConfig)}
TOPIC_CONFIG_NAMES = tuple(sorted(_BY_KAFKA_NAME))


def _coerce(name: str, type_name: Any, raw: Any):
    type_name = type_name if isinstance(type_name, str) else type_name.__name__
    try:
        if type_name == "bool":
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text not in ("true", "false"):
                raise ValueError
            return text == "true"
        if type_name == "int":
            return int(str(raw).strip())
        if type_name == "float":
            return float(str(raw).strip())
        return str(raw).strip()
    except ValueError:
        raise ConfigError(f"invalid value {raw!r} for topic config {name}") from None


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
