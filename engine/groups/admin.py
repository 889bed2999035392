"""Consumer-group administration: what ``kafka-consumer-groups.sh`` does, on a data directory.

* :func:`list_groups` — every group a data directory knows: the groups whose state is still
  in ``__consumer_offsets`` (committed offsets, classic group metadata) plus the groups with
  a live membership file (``engine.groups``), with state, protocol and member count.
* :func:`describe_group` — per partition the committed offset, the log end offset, the lag
  and the member that owns it (``--describe``); members and state too.
* :func:`plan_offset_reset` / :func:`reset_offsets` — every ``--reset-offsets`` strategy of
  Kafka (``ConsumerGroupCommand`` / ``GroupOffsetsResetter``), dry-run by default.
* :func:`delete_groups` — Kafka's DeleteGroups (empty groups only).

Where a group's members come from:

* In a **plog data directory** the live membership file is the truth. A member whose last
  heartbeat is older than its session timeout is not counted: the coordinator expires it at
  the next group operation, so it is already gone as far as any reader is concerned.
* In a **Kafka log directory** (read-only) the members are those of the group's last classic
  ``GroupMetadata`` record, and the state is what a broker loading the partition would give
  the group: ``Stable`` with members, ``Empty`` without. Nobody is connected to a stopped
  broker's files, so these members never block a reset plan there (a plan can be computed
  and exported, but never executed: plog does not write to Kafka's directories).

Every entry point reloads the data directory's metadata first, so topics another process
created are seen. Invariants: nothing here prints; reading never takes a lock or changes a
file; the only writes are :func:`reset_offsets` with ``execute=True`` (OffsetCommit records
through ``GroupCoordinator.commit`` without a member id, which the coordinator refuses
while the group has members) and :func:`delete_groups` (``GroupCoordinator.delete_group``).

Reset targets follow ``GroupOffsetsResetter``: every strategy's offset is clamped to the
partition's ``[log start offset, log end offset]`` (``checkOffsetsRange``), except
``--to-current``, which re-commits the current offset as it is (and uses the log end offset
where the group has none), as Kafka does. A timestamp with no record at or after it gives
the log end offset.
"""

from __future__ import annotations

import csv
import datetime as _dt
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence, TextIO

from plog.engine.cluster.data_dir import DataDir
from plog.engine.errors import (
    GroupError,
    GroupIdNotFoundError,
    GroupNotEmptyError,
    GroupNotInactiveError,
    InvalidResetArgumentError,
    NoOffsetForPartitionError,
    ReadOnlyDataDirError,
    UnknownTopicOrPartitionError,
)
from plog.engine.groups.committed_offsets import CommittedOffset, GroupState, read_group_state
from plog.engine.groups.coordinator import PROTOCOL_TYPE, GroupCoordinator
from plog.engine.offset_spec import EARLIEST, LATEST, OffsetSpec, parse_offset, resolve_offset
from plog.engine.storage.file_names import TopicPartition

__all__ = [
    "DeleteGroupsResult",
    "GroupDescription",
    "GroupIdNotFoundError",
    "GroupListing",
    "GroupNotInactiveError",
    "InvalidResetArgumentError",
    "MemberDescription",
    "OffsetReset",
    "PartitionLag",
    "RESET_STRATEGIES",
    "ResetPlan",
    "ResetStrategy",
    "delete_groups",
    "describe_group",
    "list_groups",
    "parse_datetime",
    "parse_iso_duration",
    "parse_reset_plan",
    "parse_topic_arg",
    "plan_offset_reset",
    "read_reset_plan",
    "reset_offsets",
]

STABLE = "Stable"
EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
DEAD = "Dead"
UNKNOWN = "Unknown"
#: Group states a reset is allowed in (``ConsumerGroupCommand.resetOffsets``).
INACTIVE_STATES = (EMPTY, DEAD)

#: The strategies, by their Kafka option name; ``to`` is plog's offset language.
RESET_STRATEGIES = ("to-earliest", "to-latest", "to-offset", "shift-by", "to-datetime", "by-duration",
                    "to-current", "from-file", "to")


# -- results ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupListing:
    """One group of :func:`list_groups`. ``protocol_type`` is None for a group that only has
    committed offsets (a standalone consumer's, or a reset's); ``protocol`` is None while the
    group has no members."""

    group_id: str
    state: str
    protocol_type: str | None
    protocol: str | None
    members: int


@dataclass(frozen=True)
class MemberDescription:
    """A member and its assigned partitions (``assignment`` is None when the group's
    protocol is not the consumer protocol, e.g. Kafka Connect, so it cannot be decoded)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...] | None


@dataclass(frozen=True)
class PartitionLag:
    """One row of ``describe``. ``current_offset`` is None when the group has no committed
    offset there; ``log_end_offset`` when the partition is not in this directory (a deleted
    topic, or a partition another broker holds); ``lag`` when either is None. The consumer
    fields are None for a partition no member owns."""

    topic: str
    partition: int
    current_offset: int | None
    leader_epoch: int | None
    log_end_offset: int | None
    lag: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None


@dataclass(frozen=True)
class GroupDescription:
    """A group as :func:`describe_group` found it. ``live`` is True when the members come
    from the live membership file (plog data directory), False when they are the ones last
    recorded in ``__consumer_offsets`` (Kafka log directory). ``partitions`` is sorted by
    topic and partition; members keep the coordinator's order."""

    group_id: str
    state: str
    protocol_type: str | None
    protocol: str | None
    generation: int | None
    members: tuple[MemberDescription, ...]
    partitions: tuple[PartitionLag, ...]
    live: bool


@dataclass(frozen=True)
class ResetStrategy:
    """One ``--reset-offsets`` scenario. ``value``: the offset (``to-offset``), the shift
    (``shift-by``), epoch ms (``to-datetime``, and ``by-duration`` once resolved against
    "now" at construction), ``{TopicPartition: offset}`` (``from-file``), an
    :class:`OffsetSpec` (``to``), None otherwise. ``text`` is what the user wrote."""

    kind: str
    value: object = None
    text: str = ""

    @classmethod
    def to_earliest(cls) -> "ResetStrategy":
        return cls("to-earliest")

    @classmethod
    def to_latest(cls) -> "ResetStrategy":
        return cls("to-latest")

    @classmethod
    def to_current(cls) -> "ResetStrategy":
        return cls("to-current")

    @classmethod
    def to_offset(cls, offset: int) -> "ResetStrategy":
        return cls("to-offset", int(offset), str(offset))

    @classmethod
    def shift_by(cls, n: int) -> "ResetStrategy":
        return cls("shift-by", int(n), str(n))

    @classmethod
    def to_datetime(cls, text: str) -> "ResetStrategy":
        return cls("to-datetime", parse_datetime(text), text)

    @classmethod
    def by_duration(cls, text: str, now_ms: int | None = None) -> "ResetStrategy":
        now = _now_ms() if now_ms is None else now_ms
        # Instant.now().minus(duration).toEpochMilli(): floor of the exact instant.
        return cls("by-duration", (now * 1_000_000 - parse_iso_duration(text)) // 1_000_000, text)

    @classmethod
    def from_plan(cls, plan: dict, text: str = "") -> "ResetStrategy":
        return cls("from-file", {TopicPartition(*tp): int(o) for tp, o in plan.items()}, text)

    @classmethod
    def to_spec(cls, text: str, now_ms: int | None = None) -> "ResetStrategy":
        return cls("to", parse_offset(text, now_ms), text)


@dataclass(frozen=True)
class OffsetReset:
    """One partition of a reset plan: where the group is (None: no committed offset) and
    where it will be. ``new_offset`` is within ``[log_start_offset, log_end_offset]`` except
    for ``to-current`` (see the module docstring)."""

    topic: str
    partition: int
    current_offset: int | None
    new_offset: int
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True)
class ResetPlan:
    """The offsets a reset commits, sorted by topic and partition. ``executed`` is True once
    they are committed; ``state`` is the group's state when the plan was made."""

    group_id: str
    state: str
    strategy: ResetStrategy
    rows: tuple[OffsetReset, ...]
    executed: bool = False

    def offsets(self) -> dict[TopicPartition, int]:
        return {TopicPartition(r.topic, r.partition): r.new_offset for r in self.rows}


@dataclass
class DeleteGroupsResult:
    """``deleted``: group -> number of committed offsets removed with it; ``failed``:
    group -> one-line reason. Every requested group is in exactly one of them."""

    deleted: dict[str, int] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


# -- reading a group ------------------------------------------------------------------------------


@dataclass
class _Group:
    """What the directory says of one group (internal; see the module docstring)."""

    group_id: str
    exists: bool
    state: str
    protocol_type: str | None
    protocol: str | None
    generation: int | None
    members: list[MemberDescription]
    offsets: dict[TopicPartition, CommittedOffset]
    live: bool


def _now_ms() -> int:
    return int(time.time() * 1000)


def _read_group(dd: DataDir, group_id: str, state: GroupState | None, live_ids: set[str], now_ms: int) -> _Group:
    offsets = dict(state.offsets) if state is not None else {}
    if dd.kafka_log_dir:
        return _recorded_group(group_id, state, offsets)
    if group_id not in live_ids:
        # Only committed offsets (a standalone consumer's or a reset's): Kafka keeps such a
        # group Empty with no protocol type.
        return _Group(group_id, bool(state is not None and state.exists), EMPTY, None, None, None, [], offsets, True)
    membership = GroupCoordinator(dd).membership(group_id)
    live = [m for m in membership.members.values() if now_ms - m.last_seen_ms <= m.session_timeout_ms]
    if not live:
        group_state = EMPTY
    elif len(live) < len(membership.members):
        group_state = PREPARING_REBALANCE  # the next operation expires the others and rebalances
    else:
        group_state = membership.state
    members = [MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host, tuple(m.assignment))
               for m in live]
    # A file whose generation never moved was only written by commits without a member (a
    # reset): like Kafka's group created by an OffsetCommit, it has no protocol type.
    protocol_type = PROTOCOL_TYPE if membership.generation > 0 else None
    return _Group(group_id, True, group_state, protocol_type, membership.protocol if live else None,
                  membership.generation or None, members, offsets, True)


def _recorded_group(group_id: str, state: GroupState | None, offsets: dict) -> _Group:
    """A group as a broker would load it from ``__consumer_offsets``."""
    if state is None or not state.exists:
        return _Group(group_id, False, DEAD, None, None, None, [], offsets, False)
    meta = state.metadata
    if meta is None:
        # Only offsets, or only records of group types not modelled here (KIP-848, share).
        group_state = UNKNOWN if state.live_skipped_keys and not offsets else EMPTY
        return _Group(group_id, True, group_state, None, None, None, [], offsets, False)
    members = [MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.assignment)
               for m in meta.members]
    return _Group(group_id, True, STABLE if members else EMPTY, meta.protocol_type or None, meta.protocol,
                  meta.generation, members, offsets, False)


def _group_state_record(dd: DataDir, group_id: str) -> GroupState | None:
    """The group's replayed ``__consumer_offsets`` state, or None.

    The group's partition is found with Kafka's default of 50 partitions (plog always uses
    50); a Kafka cluster configured otherwise put it elsewhere, so in a Kafka log directory
    a miss falls back to replaying every partition present."""
    states = read_group_state(dd.log_dirs(), group_id)
    if group_id not in states and dd.kafka_log_dir:
        states = read_group_state(dd.log_dirs())
    return states.get(group_id)


def _load(dd: DataDir, group_id: str, now_ms: int | None) -> _Group:
    dd.reload()
    live_ids = set(GroupCoordinator(dd).list_live_groups())
    return _read_group(dd, group_id, _group_state_record(dd, group_id), live_ids,
                       _now_ms() if now_ms is None else now_ms)


def _log_offsets(dd: DataDir, tp: TopicPartition) -> tuple[int, int] | None:
    """``(log start, high watermark)`` of the leader replica as on disk now (ListOffsets latest), or None when this
    directory does not hold the partition."""
    try:
        log = dd.open_reader(tp)
    except UnknownTopicOrPartitionError:
        return None
    try:
        return log.log_start_offset, log.high_watermark
    finally:
        log.close()


# -- list and describe ----------------------------------------------------------------------------


def list_groups(dd: DataDir, *, now_ms: int | None = None) -> list[GroupListing]:
    """Every group known to ``dd``, sorted by id (see the module docstring). Groups whose
    state is gone from ``__consumer_offsets`` (deleted) and that have no membership file are
    not listed."""
    dd.reload()
    now = _now_ms() if now_ms is None else now_ms
    states = read_group_state(dd.log_dirs())
    live_ids = set(GroupCoordinator(dd).list_live_groups())
    ids = {g for g, s in states.items() if s.exists} | live_ids
    out = []
    for group_id in sorted(ids):
        g = _read_group(dd, group_id, states.get(group_id), live_ids, now)
        out.append(GroupListing(group_id, g.state, g.protocol_type, g.protocol, len(g.members)))
    return out


def describe_group(dd: DataDir, group_id: str, *, now_ms: int | None = None) -> GroupDescription:
    """Kafka's ``--describe`` of one group: a row for every partition with a committed offset
    and every partition assigned to a member, with the log end offset (read-only) and the
    lag ``log end - committed``. Raises :class:`GroupIdNotFoundError` for an unknown group."""
    g = _load(dd, group_id, now_ms)
    if not g.exists:
        raise GroupIdNotFoundError(f"Consumer group '{group_id}' does not exist.")
    owners: dict[TopicPartition, MemberDescription] = {}
    for m in g.members:
        for tp in m.assignment or ():
            owners[TopicPartition(*tp)] = m
    rows = []
    for tp in sorted(set(g.offsets) | set(owners)):
        committed = g.offsets.get(tp)
        current = committed.offset if committed is not None else None
        bounds = _log_offsets(dd, tp)
        end = bounds[1] if bounds is not None else None
        # Kafka's getLag: no lag without both numbers (an offset of -1 means none).
        lag = end - current if end is not None and current is not None and current >= 0 else None
        owner = owners.get(tp)
        rows.append(PartitionLag(tp.topic, tp.partition, current, committed.leader_epoch if committed else None,
                                 end, lag, owner.member_id if owner else None, owner.host if owner else None,
                                 owner.client_id if owner else None))
    return GroupDescription(group_id, g.state, g.protocol_type, g.protocol, g.generation, tuple(g.members),
                            tuple(rows), g.live)


# -- parsing the reset options --------------------------------------------------------------------

_DATETIME_FORMS = ("YYYY-MM-DDTHH:mm:SS.sss with an optional zone (Z, +hh, +hhmm, +hh:mm; UTC when none), "
                   "or any ISO-8601 date/time")


def parse_datetime(text: str) -> int:
    """Epoch ms of a ``--to-datetime`` text: Kafka's ``YYYY-MM-DDTHH:mm:SS.sss`` with an
    optional ``Z``/``+hh``/``+hhmm``/``+hh:mm`` zone, UTC when it has none (``Utils.getDateTime``),
    or any other ISO-8601 date/time Python reads (``2024-01-01``, ``2024-01-01T10:00``)."""
    body = text.strip()
    try:
        if not body or not body.isascii():
            raise ValueError
        when = _dt.datetime.fromisoformat(body)
    except ValueError:
        raise InvalidResetArgumentError(f"invalid date/time {text!r}: expected {_DATETIME_FORMS}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    delta = when - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


# java.time.Duration.parse: [-+]PnDTnHnMn.nS, case-insensitive, each number signed.
_ISO_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE)
_NANOS = {"D": 86_400 * 10**9, "H": 3_600 * 10**9, "M": 60 * 10**9, "S": 10**9}


def parse_iso_duration(text: str) -> int:
    """Nanoseconds of an ISO-8601 duration as Java's ``Duration.parse`` reads it
    (``--by-duration``): ``PnDTnHnMn.nS``, e.g. ``P1D``, ``PT1H30M``, ``PT0.5S``, ``-PT6H``.
    Days are the largest unit (no years, months or weeks), as in Kafka."""
    body = text.strip()
    m = _ISO_DURATION.fullmatch(body)
    if m is None or not body.isascii() or (m.group(2) is None and m.group(3) is None) \
            or (m.group(3) is not None and m.group(3).upper() == "T"):
        raise InvalidResetArgumentError(f"invalid duration {text!r}: expected ISO-8601 PnDTnHnMnS, e.g. P1D, "
                                        "PT1H30M, PT15M, P7DT12H (subtracted from now)")
    sign, days, _t, hours, minutes, seconds, fraction = m.groups()
    total = 0
    for amount, unit in ((days, "D"), (hours, "H"), (minutes, "M"), (seconds, "S")):
        if amount is not None:
            total += int(amount) * _NANOS[unit]
    if fraction:
        nanos = int(fraction.ljust(9, "0"))
        # The fraction takes the sign of its seconds ("PT-1.5S" is minus 1.5 s).
        total += -nanos if seconds.startswith("-") else nanos
    return -total if sign == "-" else total


def parse_topic_arg(text: str) -> tuple[str, list[int] | None]:
    """``--topic`` as Kafka reads it: ``topic`` (every partition) or ``topic:0,1,2``."""
    if ":" not in text:
        if not text:
            raise InvalidResetArgumentError("empty topic name")
        return text, None
    parts = text.split(":")
    if len(parts) != 2 or not parts[0]:
        raise InvalidResetArgumentError(f"Invalid topic arg '{text}', expected topic name and partitions")
    partitions = []
    for p in parts[1].split(","):
        if not re.fullmatch(r"[0-9]{1,9}", p.strip()):
            raise InvalidResetArgumentError(f"Invalid partition '{p}' specified in topic arg '{text}'")
        partitions.append(int(p))
    return parts[0], partitions


def parse_reset_plan(text: str, group_id: str, *, source: str = "<plan>") -> dict[TopicPartition, int]:
    """The offsets of ``group_id`` in a ``--from-file`` plan: Kafka's CSV, one
    ``topic,partition,offset`` line per partition (what ``--export`` prints for one group),
    or ``group,topic,partition,offset`` lines (several groups; only this group's rows are
    kept). The first line decides the form, as in Kafka. Blank lines are skipped; a later
    line for the same partition wins. Raises :class:`InvalidResetArgumentError` naming the
    line."""
    rows = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    plan: dict[TopicPartition, int] = {}
    if not rows:
        raise InvalidResetArgumentError(f"{source}: the reset plan is empty (expected topic,partition,offset lines)")
    width = None
    for n, line in rows:
        fields = [f.strip() for f in next(csv.reader([line]))]
        if width is None:
            width = len(fields)
        if len(fields) != width or width not in (3, 4) or not fields[-2].isdigit() \
                or not re.fullmatch(r"-?[0-9]{1,19}", fields[-1]):
            form = "topic,partition,offset" if width != 4 else "group,topic,partition,offset"
            raise InvalidResetArgumentError(f"{source}:{n}: expected {form}, got {line.strip()!r}")
        if width == 4 and fields[0] != group_id:
            continue
        plan[TopicPartition(fields[-3], int(fields[-2]))] = int(fields[-1])
    if width == 4 and not plan:
        raise InvalidResetArgumentError(f"No reset plan for group {group_id} found in {source}.")
    return plan


def read_reset_plan(path: str | Path, group_id: str, *, stdin: TextIO | None = None) -> dict[TopicPartition, int]:
    """:func:`parse_reset_plan` of the file at ``path`` (``-``: standard input, ``stdin``
    when given, named ``<stdin>`` in errors). A file that is not UTF-8 text is an
    :class:`InvalidResetArgumentError` naming the first byte that is not."""
    if str(path) == "-":
        return parse_reset_plan((stdin or sys.stdin).read(), group_id, source="<stdin>")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise InvalidResetArgumentError(f"{path}: not a CSV reset plan (not UTF-8 text at byte {e.start})") from None
    return parse_reset_plan(text, group_id, source=str(path))


# -- reset ---------------------------------------------------------------------------------------


def _partitions_to_reset(dd: DataDir, g: _Group, strategy: ResetStrategy, topics: Sequence[str] | None,
                         all_topics: bool) -> list[TopicPartition]:
    if strategy.kind == "from-file":
        if topics:
            raise InvalidResetArgumentError("--from-file takes its partitions from the file; --topic cannot narrow it")
        return sorted(strategy.value)
    if all_topics == bool(topics):
        raise InvalidResetArgumentError("One of the reset scopes should be defined: --all-topics, --topic.")
    if all_topics:
        return sorted(g.offsets)  # Kafka: the partitions the group has committed offsets for
    out: list[TopicPartition] = []
    for arg in topics:
        topic, partitions = parse_topic_arg(arg)
        if partitions is None:
            out.extend(dd.partitions(topic))  # an unknown topic fails here, naming it
        else:
            out.extend(TopicPartition(topic, p) for p in partitions)
    return sorted(set(out))


def _check_partitions_exist(dd: DataDir, partitions: Iterable[TopicPartition]) -> None:
    missing = []
    for tp in partitions:
        t = dd.metadata.topics.get(tp.topic)
        if t is None or not 0 <= tp.partition < t.partitions or not dd.partition_path(tp).is_dir():
            missing.append(str(tp))
    if missing:
        raise UnknownTopicOrPartitionError(f'The partitions "{",".join(missing)}" do not exist in {dd.path}')


def _target(strategy: ResetStrategy, tp: TopicPartition, current: int | None, log) -> int:
    """The new offset of ``tp`` (see the module docstring for the clamping rule)."""
    kind = strategy.kind
    if kind == "to-current":
        return current if current is not None else log.high_watermark
    if kind == "to-earliest":
        spec = EARLIEST
    elif kind == "to-latest":
        spec = LATEST
    elif kind == "to-offset":
        spec = OffsetSpec("offset", strategy.value)
    elif kind == "shift-by":
        if current is None:
            raise NoOffsetForPartitionError(
                f"Cannot shift offset for partition {tp} since there is no current committed offset")
        spec = OffsetSpec("offset", current + strategy.value)
    elif kind in ("to-datetime", "by-duration"):
        # Negative ListOffsets timestamps are sentinels (-1 latest, -2 earliest): a time
        # before the epoch means "the first record".
        spec = OffsetSpec("timestamp", max(strategy.value, 0))
    elif kind == "from-file":
        spec = OffsetSpec("offset", strategy.value[tp])
    elif kind == "to":
        spec = strategy.value
    else:
        raise InvalidResetArgumentError(f"unknown reset strategy {kind!r}: expected one of {', '.join(RESET_STRATEGIES)}")

    def at_time(ts: int) -> int | None:
        found = log.fetch_offset_by_timestamp(ts)
        return None if found is None else found.offset

    try:
        return resolve_offset(spec, log_start_offset=log.log_start_offset, log_end_offset=log.high_watermark,
                              offset_for_timestamp=at_time, committed=current)
    except NoOffsetForPartitionError:
        raise NoOffsetForPartitionError(f"Cannot reset partition {tp} to its committed offset: the group has "
                                        "none there") from None


def _inactive_or_raise(g: _Group) -> None:
    # Members recorded in a Kafka log directory are not connected to anything (see the
    # module docstring); only live plog members block a reset.
    if g.live and g.state not in INACTIVE_STATES:
        raise GroupNotInactiveError(f"Assignments can only be reset if the group '{g.group_id}' is inactive, "
                                    f"but the current state is {g.state}.")


def plan_offset_reset(dd: DataDir, group_id: str, strategy: ResetStrategy, *, topics: Sequence[str] | None = None,
                      all_topics: bool = False, now_ms: int | None = None) -> ResetPlan:
    """The offsets ``strategy`` gives ``group_id`` on the partitions of ``topics``
    (``topic`` or ``topic:0,1``) or, with ``all_topics``, on every partition it has an
    offset for; ``from-file`` brings its own partitions. Read-only. Raises
    :class:`GroupNotInactiveError` when the group has live members (Kafka refuses a dry run
    too), :class:`UnknownTopicOrPartitionError` for partitions this directory does not
    hold."""
    g = _load(dd, group_id, now_ms)
    _inactive_or_raise(g)
    partitions = _partitions_to_reset(dd, g, strategy, topics, all_topics)
    _check_partitions_exist(dd, partitions)
    rows = []
    for tp in partitions:
        committed = g.offsets.get(tp)
        current = committed.offset if committed is not None else None
        log = dd.open_reader(tp)
        try:
            new = _target(strategy, tp, current, log)
            rows.append(OffsetReset(tp.topic, tp.partition, current, new, log.log_start_offset, log.high_watermark))
        finally:
            log.close()
    return ResetPlan(group_id, g.state, strategy, tuple(rows))


def reset_offsets(dd: DataDir, group_id: str, strategy: ResetStrategy, *, topics: Sequence[str] | None = None,
                  all_topics: bool = False, execute: bool = False, now_ms: int | None = None) -> ResetPlan:
    """:func:`plan_offset_reset`, then with ``execute`` commit the plan as OffsetCommit
    records (no leader epoch, as Kafka's reset). A member that joins between the check and
    the commit makes the coordinator refuse it, reported as :class:`GroupNotInactiveError`."""
    if execute and dd.kafka_log_dir:
        raise ReadOnlyDataDirError(
            f"{dd.path} is a Kafka log directory: plog does not commit offsets there; export the plan "
            "(--export) and apply it with kafka-consumer-groups.sh --reset-offsets --from-file")
    plan = plan_offset_reset(dd, group_id, strategy, topics=topics, all_topics=all_topics, now_ms=now_ms)
    if not execute:
        return plan
    try:
        GroupCoordinator(dd).commit(group_id, plan.offsets(), member_id=None)
    except GroupNotEmptyError:
        # A member joined after the check: the group is rebalancing (or already Stable).
        state = _load(dd, group_id, None).state
        if state in INACTIVE_STATES:
            state = PREPARING_REBALANCE
        raise GroupNotInactiveError(f"Assignments can only be reset if the group '{group_id}' is inactive, "
                                    f"but the current state is {state}.") from None
    return ResetPlan(plan.group_id, plan.state, plan.strategy, plan.rows, executed=True)


# -- delete --------------------------------------------------------------------------------------


def delete_groups(dd: DataDir, group_ids: Sequence[str]) -> DeleteGroupsResult:
    """Kafka's DeleteGroups for each group (duplicates once): only an empty group can go;
    its offsets and metadata are tombstoned. A failure for one group does not stop the
    others; each is reported in the result."""
    if dd.kafka_log_dir:
        raise ReadOnlyDataDirError(f"{dd.path} is a Kafka log directory: plog reads it but does not delete "
                                   "groups from it")
    dd.reload()
    coordinator = GroupCoordinator(dd)
    result = DeleteGroupsResult()
    for group_id in dict.fromkeys(group_ids):
        try:
            result.deleted[group_id] = coordinator.delete_group(group_id)
        except GroupError as e:
            result.failed[group_id] = " ".join(str(e).split())
    return result

