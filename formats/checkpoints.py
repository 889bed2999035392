"""Text files of a Kafka log directory: checkpoints, partition.metadata, meta.properties and
the clean-shutdown marker. Parsers take ``str`` (or ``bytes``, decoded the way Kafka decodes
that file) and return values; formatters return ``str``. Writing (tmp file, fsync, atomic
rename, fsync of the parent directory) is the engine's job.

Offset checkpoint (version 0; ``OffsetCheckpointFile`` over ``CheckpointFile``)::

    0\\n
    <N>\\n
    <topic> <partition> <offset>\\n      N lines, single spaces, trailing newline

It is the format of four files in a log directory, which differ only in meaning:

    recovery-point-offset-checkpoint   per partition: offset up to which the log is flushed
                                       (recovery starts there after an unclean shutdown)
    log-start-offset-checkpoint        per partition: log start offset, written only for
                                       partitions whose log start is above the first
                                       segment's base offset
    replication-offset-checkpoint      per partition: high watermark
    cleaner-offset-checkpoint          per compacted partition: first dirty offset

Reader rules (``CheckpointReadBuffer``): an empty file is an empty map; lines end at
``\\n``, ``\\r`` or ``\\r\\n`` (``BufferedReader.readLine``); the version line must be the
integer 0 ("Unrecognised version:..."); a missing count line is an empty map; each entry line
is split on Java's ``\\s+`` and must have exactly 3 parts ("Malformed line in checkpoint file
[<name>]: <line>"); the number of entry lines must equal the count ("Expected [N] entries in
checkpoint file [<name>], but found only [M]"). Kafka lets a non-numeric partition or offset
escape as a raw ``NumberFormatException``; here it is the "Malformed line" error. Kafka
writes entries in HashMap order, which is unspecified; :func:`format_offset_checkpoint`
sorts by (topic, partition) so output is deterministic.

``leader-epoch-checkpoint`` (``LeaderEpochCheckpointFile``): the same framing, version 0,
lines ``<epoch> <startOffset>`` in ascending epoch order (2 parts per line).

``partition.metadata`` (``PartitionMetadata.encode``)::

    version: 0\\ntopic_id: <22-char URL-safe base64 of the 16-byte UUID, no padding>

with no trailing newline. Reader: each line is split once on ``:\\s+``; the key must be
``version`` then ``topic_id``; version must be an int >= 0; the topic id must decode to 16
bytes and must not be the all-zero UUID.

``meta.properties`` (``MetaProperties`` written by ``Properties.store(writer, "")``)::

    #\\n
    #<java.util.Date.toString(), e.g. Sat Nov 21 01:47:22 UTC 2026>\\n
    key=value\\n ...

Keys: ``version`` (0 = ZooKeeper era, 1 = KRaft), ``cluster.id``, ``broker.id`` (v0) or
``node.id`` (v1), ``directory.id`` (base64url UUID, Kafka >= 3.7). The key order is the
iteration order of Java's Properties, which changed with the JDK: Java <= 8 iterates a
``Hashtable`` (order="hashtable"), Java 9-17 a ``ConcurrentHashMap``
(order="concurrent-hash-map"), and Java >= 18 writes keys sorted (order="sorted", the
default). Every ``meta.properties`` in our corpus is reproduced byte for byte by one of the
three. Kafka writes through a UTF-8 ``Writer`` (no ``\\uXXXX`` escapes) but reads through
``Properties.load(InputStream)``, which decodes ISO-8859-1; :func:`parse_properties` does the
same for ``bytes`` input, so a non-ASCII value reads back as Kafka would read it.

``.kafka_cleanshutdown``: empty (Kafka <= 3.6) or ``{"version":0,"brokerEpoch":<long>}``
(Kafka >= 3.7, Jackson field order). Kafka treats an unreadable file as "clean, epoch
unknown"; :func:`parse_clean_shutdown` raises :class:`CheckpointError` so tools can report
it, and callers that mirror the broker catch it.
"""

from __future__ import annotations

import base64
import json
import re
import uuid as _uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping, NamedTuple

if TYPE_CHECKING:  # (imported where used at run time: java_date_string)
    import datetime

from . import java
from .errors import CheckpointError
from .java import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

CHECKPOINT_VERSION = 0

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"

#: The offset-checkpoint files of a log directory and what their offsets mean.
OFFSET_CHECKPOINT_FILES = {
    RECOVERY_POINT_CHECKPOINT: "recovery point (offset up to which the log is flushed)",
    LOG_START_OFFSET_CHECKPOINT: "log start offset (only when above the first segment's base)",
    REPLICATION_OFFSET_CHECKPOINT: "high watermark",
    CLEANER_OFFSET_CHECKPOINT: "first dirty offset of a compacted partition",
}


class TopicPartition(NamedTuple):
    """Key of an offset checkpoint; a plain ``(topic, partition)`` tuple compares equal."""

    topic: str
    partition: int


class EpochEntry(NamedTuple):
    """A leader epoch and the first offset written in it."""

    epoch: int
    start_offset: int


class PartitionMetadata(NamedTuple):
    """Contents of ``partition.metadata``."""

    version: int
    topic_id: _uuid.UUID


# -- Java text primitives ----------------------------------------------------------------

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# Java's \s (no UNICODE_CHARACTER_CLASS): ASCII whitespace only.
_JAVA_WS = re.compile(r"[ \t\n\x0b\f\r]+")
_PARTITION_METADATA_SEP = re.compile(r":[ \t\n\x0b\f\r]+")


def _java_lines(text: str) -> list[str]:
    """Lines as ``BufferedReader.readLine`` returns them (a final terminator ends, not starts, a line)."""
    if not text:
        return []
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def _as_text(data: str | bytes | bytearray | memoryview, name: str, what: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{what} [{name}] is not valid UTF-8 (byte {e.start})") from None


# -- offset and leader-epoch checkpoints (CheckpointFile, version 0) ---------------------


def _checkpoint_header_int(line: str, name: str) -> int:
    value = java.parse_int(line)
    if value is None:
        raise CheckpointError(f"Malformed line in checkpoint file [{name}]: {line}")
    return value


def _read_checkpoint(text, name: str, parse_entry) -> list:
    lines = _java_lines(_as_text(text, name, "Checkpoint file"))
    if not lines:
        return []
    version = _checkpoint_header_int(lines[0], name)
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(
            f"Unrecognised version:{version}, expected version: {CHECKPOINT_VERSION} "
            f"in checkpoint file at: {name}"
        )
    if len(lines) < 2:
        return []
    expected = _checkpoint_header_int(lines[1], name)
    entries = []  # grown line by line: the count is only compared, never trusted for sizing
    for line in lines[2:]:
        entry = parse_entry(line)
        if entry is None:
            raise CheckpointError(f"Malformed line in checkpoint file [{name}]: {line}")
        entries.append(entry)
    if len(entries) != expected:
        raise CheckpointError(
            f"Expected [{expected}] entries in checkpoint file [{name}], "
            f"but found only [{len(entries)}]"
        )
    return entries


def _write_checkpoint(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in [str(CHECKPOINT_VERSION), str(len(lines)), *lines])


def _parse_offset_line(line: str) -> tuple[TopicPartition, int] | None:
    parts = java.split(line, _JAVA_WS)
    if len(parts) != 3:
        return None
    partition = java.parse_int(parts[1])
    offset = java.parse_int(parts[2], INT64_MIN, INT64_MAX)
    if partition is None or offset is None:
        return None
    return TopicPartition(parts[0], partition), offset


def parse_offset_checkpoint(text: str | bytes, name: str = "") -> dict[TopicPartition, int]:
    """Parse an offset checkpoint into ``{(topic, partition): offset}``.

    A partition listed twice keeps its last offset (Kafka fills a HashMap).
    """
    return dict(_read_checkpoint(text, name, _parse_offset_line))


def format_offset_checkpoint(offsets: Mapping[tuple[str, int], int]) -> str:
    """Offset checkpoint text, entries sorted by (topic, partition), trailing newline."""
    lines = []
    for (topic, partition), offset in sorted(offsets.items()):
        if not topic or _JAVA_WS.search(topic):
            raise ValueError(f"Topic {topic!r} cannot be written to an offset checkpoint")
        if not INT32_MIN <= partition <= INT32_MAX or not INT64_MIN <= offset <= INT64_MAX:
            raise ValueError(f"Partition {partition} or offset {offset} is out of range")
        lines.append(f"{topic} {partition} {offset}")
    return _write_checkpoint(lines)


def _parse_epoch_line(line: str) -> EpochEntry | None:
    parts = java.split(line, _JAVA_WS)
    if len(parts) != 2:
        return None
    epoch = java.parse_int(parts[0])
    start_offset = java.parse_int(parts[1], INT64_MIN, INT64_MAX)
    if epoch is None or start_offset is None:
        return None
    return EpochEntry(epoch, start_offset)


def parse_leader_epoch_checkpoint(text: str | bytes, name: str = "") -> list[EpochEntry]:
    """Parse a ``leader-epoch-checkpoint`` into its entries, in file order."""
    return _read_checkpoint(text, name, _parse_epoch_line)


def format_leader_epoch_checkpoint(entries: Iterable[tuple[int, int]]) -> str:
    """``leader-epoch-checkpoint`` text for entries in the given (ascending) order."""
    lines = []
    for epoch, start_offset in entries:
        if not INT32_MIN <= epoch <= INT32_MAX or not INT64_MIN <= start_offset <= INT64_MAX:
            raise ValueError(f"Epoch {epoch} or start offset {start_offset} is out of range")
        lines.append(f"{epoch} {start_offset}")
    return _write_checkpoint(lines)


# -- UUIDs as Kafka prints them (Uuid.toString / Uuid.fromString) ------------------------

_BASE64URL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
ZERO_UUID = _uuid.UUID(int=0)


def uuid_to_base64url(value: _uuid.UUID | bytes) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding (22 chars)."""
    raw = value.bytes if isinstance(value, _uuid.UUID) else bytes(value)
    if len(raw) != 16:
        raise ValueError(f"A UUID is 16 bytes, not {len(raw)}")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _illegal_base64_char(ch: str) -> str:
    # Java decodes String input as ISO-8859-1 bytes ('?' for anything wider) and prints the
    # signed byte in hex.
    code = ord(ch) if ord(ch) <= 0xFF else 0x3F
    signed = code - 256 if code >= 128 else code
    return f"Illegal base64 character {'-' if signed < 0 else ''}{abs(signed):x}"


def base64url_to_uuid(text: str) -> _uuid.UUID:
    """Kafka's ``Uuid.fromString``: Java's URL-safe base64 decoder, then exactly 16 bytes."""
    if len(text) > 24:
        raise CheckpointError(
            f"Input string with prefix `{text[:24]}` is too long to be decoded as a base64 UUID"
        )
    # Java accepts the padding or its absence; '=' ends the data and must complete a unit.
    body, sep, rest = text.partition("=")
    padding = sep + rest
    for ch in body:
        if ch not in _BASE64URL_CHARS:
            raise CheckpointError(_illegal_base64_char(ch))
    rem = len(body) % 4
    if padding and (rem < 2 or padding != "=" * (4 - rem)):
        raise CheckpointError("Input byte array has wrong 4-byte ending unit")
    if rem == 1:
        raise CheckpointError("Last unit does not have enough valid bits")
    raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    if len(raw) != 16:
        raise CheckpointError(
            f"Input string `{text}` decoded as {len(raw)} bytes, which is not equal to the "
            f"expected 16 bytes of a base64-encoded UUID"
        )
    return _uuid.UUID(bytes=raw)


# -- partition.metadata ------------------------------------------------------------------


def parse_partition_metadata(text: str | bytes, name: str = "") -> PartitionMetadata:
    """Parse ``partition.metadata`` (``PartitionMetadataReadBuffer``)."""
    lines = _java_lines(_as_text(text, name, "Partition metadata file"))

    def field(index: int, key: str) -> tuple[str, str]:
        # A missing line prints as Java's String.format prints null.
        line = lines[index] if index < len(lines) else "null"
        parts = _PARTITION_METADATA_SEP.split(line, maxsplit=1) if index < len(lines) else []
        if len(parts) != 2 or parts[0] != key:
            raise CheckpointError(f"Malformed line in partition metadata file [{name}]: {line}")
        return line, parts[1]

    line, value = field(0, "version")
    version = java.parse_int(value)
    if version is None:
        raise CheckpointError(f"Malformed line in partition metadata file [{name}]: {line}")
    if version < 0:
        raise CheckpointError(f"Unrecognized version of partition metadata file ({name}): {version}")
    line, value = field(1, "topic_id")
    try:
        topic_id = base64url_to_uuid(value)
    except CheckpointError:
        raise CheckpointError(f"Malformed line in partition metadata file [{name}]: {line}") from None
    if topic_id == ZERO_UUID:
        raise CheckpointError(f"Invalid topic ID in partition metadata file ({name})")
    return PartitionMetadata(version, topic_id)


def format_partition_metadata(topic_id: _uuid.UUID | bytes | str, version: int = 0) -> str:
    """``partition.metadata`` text: ``version: 0\\ntopic_id: <id>``, no trailing newline."""
    if isinstance(topic_id, str):
        topic_id = base64url_to_uuid(topic_id)
    return f"version: {version}\ntopic_id: {uuid_to_base64url(topic_id)}"


# -- Java Properties (load / store) ------------------------------------------------------


def _logical_lines(text: str):
    """Logical lines of a properties file, as ``Properties.LineReader`` (JDK 9+) yields them.

    Leading ' ', '\\t', '\\f' of each natural line are skipped; blank lines and lines whose
    first non-blank char is '#' or '!' are skipped; a line ending in an odd number of
    backslashes continues on the next natural line (whose leading blanks are skipped).
    """
    n = len(text)
    off = 0
    while True:
        line: list[str] = []
        skip_ws = True
        appended_line_begin = False
        preceding_backslash = False
        while True:
            if off >= n:
                if line:
                    if preceding_backslash:
                        line.pop()
                    yield "".join(line)
                return
            c = text[off]
            off += 1
            if skip_ws:
                if c in " \t\f":
                    continue
                if not appended_line_begin and c in "\r\n":
                    continue
                skip_ws = False
                appended_line_begin = False
            if not line and c in "#!":
                # A comment: consume through the end of the natural line.
                while off < n and text[off] not in "\r\n":
                    off += 1
                if off >= n:
                    return
                off += 1
                skip_ws = True
                continue
            if c != "\n" and c != "\r":
                line.append(c)
                preceding_backslash = not preceding_backslash if c == "\\" else False
                continue
            if not line:
                skip_ws = True
                continue
            if off >= n:
                if preceding_backslash:
                    line.pop()
                yield "".join(line)
                return
            if preceding_backslash:
                # The backslash is not part of the line; the next natural line continues it.
                line.pop()
                skip_ws = True
                appended_line_begin = True
                preceding_backslash = False
                if c == "\r" and text[off] == "\n":
                    off += 1
            else:
                yield "".join(line)
                break


_LOAD_ESCAPES = {"t": "\t", "r": "\r", "n": "\n", "f": "\f"}
_HEX = frozenset("0123456789abcdefABCDEF")


def _load_convert(s: str) -> str:
    """``Properties.loadConvert``: resolve ``\\uXXXX``, ``\\t\\r\\n\\f`` and ``\\<any>``."""
    if "\\" not in s:
        return s
    out = []
    i, end = 0, len(s)
    while i < end:
        c = s[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= end:  # cannot happen after _logical_lines; a lone trailing backslash is dropped
            break
        c = s[i]
        i += 1
        if c == "u":
            digits = s[i : i + 4]
            if len(digits) < 4 or not all(d in _HEX for d in digits):
                raise CheckpointError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_LOAD_ESCAPES.get(c, c))
    result = "".join(out)
    if any("\ud800" <= ch <= "\udfff" for ch in result):
        # Java strings are UTF-16: an escaped surrogate pair is one character.
        result = result.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return result


def parse_properties(text: str | bytes) -> dict[str, str]:
    """Parse Java properties text with ``Properties.load`` rules.

    Separators are the first unescaped '=', ':' or blank (blanks around it are skipped);
    escapes are ``\\t \\r \\n \\f \\uXXXX`` and a backslash before any other char. A later
    duplicate key overrides an earlier one. ``bytes`` are decoded as ISO-8859-1, as
    ``Properties.load(InputStream)`` (which Kafka uses for meta.properties) does.
    """
    if not isinstance(text, str):
        text = bytes(text).decode("latin-1")
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        limit = len(line)
        key_len = 0
        value_start = limit
        has_sep = False
        preceding_backslash = False
        while key_len < limit:
            c = line[key_len]
            if c in "=:" and not preceding_backslash:
                value_start = key_len + 1
                has_sep = True
                break
            if c in " \t\f" and not preceding_backslash:
                value_start = key_len + 1
                break
            preceding_backslash = not preceding_backslash if c == "\\" else False
            key_len += 1
        while value_start < limit:
            c = line[value_start]
            if c not in " \t\f":
                if not has_sep and c in "=:":
                    has_sep = True
                else:
                    break
            value_start += 1
        props[_load_convert(line[:key_len])] = _load_convert(line[value_start:])
    return props


_SAVE_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f",
                 "=": "\\=", ":": "\\:", "#": "\\#", "!": "\\!"}


def _save_convert(s: str, escape_space: bool, escape_unicode: bool) -> str:
    """``Properties.saveConvert``."""
    out = []
    for x, ch in enumerate(s):
        code = ord(ch)
        if 61 < code < 127:
            out.append("\\\\" if ch == "\\" else ch)
        elif ch == " ":
            out.append("\\ " if x == 0 or escape_space else " ")
        elif ch in _SAVE_ESCAPES:
            out.append(_SAVE_ESCAPES[ch])
        elif escape_unicode and (code < 0x20 or code > 0x7E):
            out.extend(f"\\u{unit:04X}" for unit in java.utf16_units(ch))
        else:
            out.append(ch)
    return "".join(out)


PROPERTIES_ORDERS = ("sorted", "concurrent-hash-map", "hashtable", "given")


def _ordered_keys(keys: list[str], order: str) -> list[str]:
    if order == "sorted":
        return sorted(keys, key=java.compare_key)
    if order == "concurrent-hash-map":
        return java.concurrent_hash_map_order(keys)
    if order == "hashtable":
        return java.hashtable_order(keys)
    if order == "given":
        return keys
    raise ValueError(f"Unknown properties order {order!r}; expected one of {PROPERTIES_ORDERS}")


def format_properties(
    props: Mapping[str, str], date: str, order: str = "sorted", escape_unicode: bool = False
) -> str:
    """Properties text as ``Properties.store(writer, "")`` writes it.

    ``date`` is the second comment line (``Date.toString()``, see :func:`java_date_string`).
    ``order`` picks the JDK's key order: "sorted" (Java >= 18), "concurrent-hash-map"
    (Java 9-17), "hashtable" (Java <= 8) or "given" (the mapping's order). Kafka stores
    through a ``Writer``, so non-ASCII chars are written as they are; ``escape_unicode``
    gives the ``store(OutputStream)`` form (``\\uXXXX`` outside U+0020..U+007E).
    """
    if "\n" in date or "\r" in date:
        raise ValueError("The date comment must be one line")
    lines = ["#", f"#{date}"]
    for key in _ordered_keys(list(props), order):
        lines.append(
            f"{_save_convert(key, True, escape_unicode)}={_save_convert(props[key], False, escape_unicode)}"
        )
    return "".join(f"{line}\n" for line in lines)


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def java_date_string(epoch_seconds: float, tz: datetime.tzinfo | None = None) -> str:
    """``java.util.Date.toString()``: ``EEE MMM dd HH:mm:ss zzz yyyy`` (UTC by default)."""
    import datetime  # (here: ~1 ms of every start-up otherwise)

    tz = tz or datetime.timezone.utc
    moment = datetime.datetime.fromtimestamp(epoch_seconds, tz)
    zone = moment.tzname() or "UTC"
    return (
        f"{_DAYS[moment.weekday()]} {_MONTHS[moment.month - 1]} {moment.day:02d} "
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d} {zone} {moment.year}"
    )


# -- meta.properties ---------------------------------------------------------------------

VERSION_PROP = "version"
CLUSTER_ID_PROP = "cluster.id"
BROKER_ID_PROP = "broker.id"
NODE_ID_PROP = "node.id"
DIRECTORY_ID_PROP = "directory.id"


@dataclass(frozen=True)
class MetaProperties:
    """The identity stored in a log directory's ``meta.properties``.

    ``node_id`` is written as ``broker.id`` in version 0 (ZooKeeper era) and ``node.id`` in
    version 1 (KRaft) and 2. Validation, with Kafka's messages: version 0 requires
    ``broker.id`` (as Kafka 2.x required; trunk tolerates its absence); versions 1 and 2
    require ``node.id``; version 1 requires ``cluster.id``; version 2 requires
    ``directory.id``.
    """

    version: int
    cluster_id: str | None = None
    node_id: int | None = None
    directory_id: _uuid.UUID | None = None

    def __post_init__(self) -> None:
        if self.version not in (0, 1, 2):
            raise CheckpointError(f"Unknown meta.properties version number {self.version}")
        id_prop = self.id_property
        if self.node_id is None:
            raise CheckpointError(f"Failed to find {id_prop}")
        if not INT32_MIN <= self.node_id <= INT32_MAX:
            raise CheckpointError(f"Unable to read {id_prop} as a base-10 number.")
        if self.version == 1 and self.cluster_id is None:
            raise CheckpointError("cluster.id was not found.")
        if self.version == 2 and self.directory_id is None:
            raise CheckpointError(f"Failed to find {DIRECTORY_ID_PROP}")

    @property
    def id_property(self) -> str:
        """``broker.id`` for version 0, ``node.id`` otherwise."""
        return BROKER_ID_PROP if self.version == 0 else NODE_ID_PROP

    @property
    def broker_id(self) -> int | None:
        return self.node_id

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "MetaProperties":
        """Build from parsed properties (``MetaProperties.Builder(Properties)``)."""
        raw_version = props.get(VERSION_PROP, "0")
        version = java.parse_int(java.trim(raw_version))
        if version is None:
            raise CheckpointError(f"Invalid meta.properties version string '{raw_version}'")
        if version not in (0, 1, 2):
            raise CheckpointError(f"Unknown meta.properties version number {version}")
        id_prop = BROKER_ID_PROP if version == 0 else NODE_ID_PROP
        raw_id = props.get(id_prop)
        if raw_id is None:
            raise CheckpointError(f"Failed to find {id_prop}")
        node_id = java.parse_int(raw_id)
        if node_id is None:
            raise CheckpointError(f"Unable to read {id_prop} as a base-10 number.")
        directory_id = None
        if DIRECTORY_ID_PROP in props:
            try:
                directory_id = base64url_to_uuid(props[DIRECTORY_ID_PROP])
            except CheckpointError as e:
                raise CheckpointError(
                    f"Unable to read {DIRECTORY_ID_PROP} as a Uuid: {e.reason}"
                ) from None
        return cls(version, props.get(CLUSTER_ID_PROP), node_id, directory_id)

    def to_properties(self) -> dict[str, str]:
        """The properties in Kafka's insertion order (version, cluster.id, id, directory.id)."""
        props = {VERSION_PROP: str(self.version)}
        if self.cluster_id is not None:
            props[CLUSTER_ID_PROP] = self.cluster_id
        props[self.id_property] = str(self.node_id)
        if self.directory_id is not None:
            props[DIRECTORY_ID_PROP] = uuid_to_base64url(self.directory_id)
        return props


def parse_meta_properties(text: str | bytes) -> MetaProperties:
    """Parse and validate a ``meta.properties`` file."""
    return MetaProperties.from_properties(parse_properties(text))


def format_meta_properties(meta: MetaProperties, date: str, order: str = "sorted") -> str:
    """``meta.properties`` text as Kafka writes it (see :func:`format_properties`)."""
    return format_properties(meta.to_properties(), date, order)


# -- .kafka_cleanshutdown ----------------------------------------------------------------


def parse_clean_shutdown(text: str | bytes, name: str = "") -> int | None:
    """The broker epoch in a clean-shutdown file, or None when it has none.

    Empty (Kafka <= 3.6) and ``{"version":0,"brokerEpoch":null}`` give None; unknown JSON
    fields are ignored (``@JsonIgnoreProperties(ignoreUnknown = true)``).
    """
    text = _as_text(text, name, "Clean shutdown file")
    if not text.strip():
        return None

    def reject_constant(token: str):
        raise ValueError(f"{token} is not JSON")

    try:
        content = json.loads(text, parse_constant=reject_constant)
    except ValueError as e:
        raise CheckpointError(f"Malformed clean shutdown file [{name}]: {e}") from None
    if not isinstance(content, dict):
        raise CheckpointError(f"Malformed clean shutdown file [{name}]: not a JSON object")
    epoch = content.get("brokerEpoch")
    if epoch is None:
        return None
    if type(epoch) is not int or not INT64_MIN <= epoch <= INT64_MAX:
        raise CheckpointError(f"Malformed clean shutdown file [{name}]: brokerEpoch {epoch!r} is not a long")
    return epoch


def format_clean_shutdown(broker_epoch: int = -1) -> str:
    """``{"version":0,"brokerEpoch":N}`` as Kafka >= 3.7 writes it (no newline)."""
    if not INT64_MIN <= broker_epoch <= INT64_MAX:
        raise ValueError(f"Broker epoch {broker_epoch} does not fit a long")
    return f'{{"version":0,"brokerEpoch":{broker_epoch}}}'
