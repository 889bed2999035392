"""Java, as far as Kafka's files and tools depend on it: the one place plog emulates the JVM.

Kafka is Java (and Scala on the JVM), and some of what it writes or prints follows from
Java's own algorithms rather than from any file format: the order a ``HashMap`` iterates
decides the order of a producer snapshot's entries, of the members an assignor walks, of
DumpLogSegments' report lines and of a transaction's partitions; ``String.hashCode``
picks a group's ``__consumer_offsets`` partition; ``String.trim``, ``String.split`` and
``Integer.parseInt`` decide which text a reader accepts; ``new String(bytes, UTF_8)``
how malformed text prints. Everything else in plog calls these rather than its own copy.

Invariants: pure functions of their arguments (no JVM, no I/O); results of Java ``int``
arithmetic are signed 32-bit values (:func:`int32`); strings are compared, hashed and
measured in UTF-16 code units, as Java does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


# -- int arithmetic ------------------------------------------------------------------------


def int32(value: int) -> int:
    """``value`` as a Java ``int``: the low 32 bits, two's complement."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


# -- strings -------------------------------------------------------------------------------

# Integer.parseInt / Long.parseLong: an optional sign, then digits as Character.digit(c, 10)
# accepts them (Unicode Nd, which is what Python's \d matches).
_JAVA_INT = re.compile(r"[+-]?\d+")


def utf16_units(text: str) -> list[int]:
    """The UTF-16 code units of ``text`` (a Java ``char[]``)."""
    data = text.encode("utf-16-be", "surrogatepass")
    return [(data[i] << 8) | data[i + 1] for i in range(0, len(data), 2)]


def compare_key(text: str) -> bytes:
    """A sort key ordering strings as ``String.compareTo`` does (by UTF-16 code unit):
    big-endian UTF-16 bytes sort the same way."""
    return text.encode("utf-16-be", "surrogatepass")


def string_hash_code(text: str) -> int:
    """``String.hashCode``: ``h = 31 * h + c`` over the UTF-16 code units, as an int."""
    h = 0
    for unit in utf16_units(text):
        h = (31 * h + unit) & 0xFFFFFFFF
    return int32(h)


def trim(text: str) -> str:
    """``String.trim``: strips every char <= U+0020 (not Unicode whitespace) from both ends."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def split(text: str, separator: str | re.Pattern) -> list[str]:
    """``String.split`` (limit 0) on a literal separator or a regex that never matches the
    empty string: text without a match is itself (``"".split(",")`` is ``[""]``); else
    trailing empty strings are dropped (``",".split(",")`` is empty) and a leading one kept."""
    parts = separator.split(text) if isinstance(separator, re.Pattern) else text.split(separator)
    if len(parts) == 1:
        return parts
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_int(text: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int | None:
    """``Integer.parseInt`` (``Long.parseLong`` with the int64 bounds): the value, or None
    where Java throws ``NumberFormatException``."""
    if not _JAVA_INT.fullmatch(text):
        return None
    value = int(text)
    return value if lo <= value <= hi else None


# ``new String(bytes, UTF_8)`` as the JDK (17+) decodes malformed input.
#
# Valid UTF-8 decodes the same everywhere. Malformed input does not: Python's "replace"
# handler follows Unicode's "maximal subpart" rule, while the JDK's String decoder has its
# own (String.decodeUTF8_UTF16): a bad 3- or 4-byte sequence may be one U+FFFD or several
# depending on which byte is wrong, an encoded surrogate (ED A0..BF ..) is one U+FFFD rather
# than three, and a sequence cut off by the end of the input is a single U+FFFD (its
# remaining continuation bytes are dropped). Kafka's tools print keys, values and header
# keys this way, so plog's text output must too.

_REPLACEMENT = "\ufffd"


def _cont(b: int) -> bool:
    return (b & 0xC0) == 0x80


def utf8_decode(data: bytes | bytearray | memoryview) -> str:
    """``new String(bytes, UTF_8)`` as the JDK (17+) decodes it, malformed input included
    (see the section comment above). For valid UTF-8 this is ``data.decode("utf-8")``; it
    never raises."""
    raw = bytes(data)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return _decode_slow(raw)


def string_from_escaped(text: str) -> str:
    """The Java string of the bytes ``text`` was decoded from with ``surrogateescape``
    (how plog's decoders keep invalid UTF-8 for a byte-exact round trip): Java shows
    U+FFFD where plog keeps lone surrogates (:func:`utf8_decode`)."""
    if text.isascii():
        return text
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # surrogates no byte decodes to: not from such a decode
        return text
    return utf8_decode(raw)


def _decode_slow(src: bytes) -> str:
    out: list[str] = []
    append = out.append
    sp, sl = 0, len(src)
    while sp < sl:
        b1 = src[sp]
        sp += 1
        if b1 < 0x80:
            append(chr(b1))
        elif 0xC2 <= b1 <= 0xDF:
            if sp < sl:
                b2 = src[sp]
                sp += 1
                if not _cont(b2):
                    append(_REPLACEMENT)
                    sp -= 1
                else:
                    append(chr(((b1 & 0x1F) << 6) | (b2 & 0x3F)))
                continue
            append(_REPLACEMENT)
            break
        elif 0xE0 <= b1 <= 0xEF:
            if sp + 1 < sl:
                b2, b3 = src[sp], src[sp + 1]
                sp += 2
                if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2) or not _cont(b3):
                    append(_REPLACEMENT)
                    sp -= 3
                    # malformed3: how many bytes the bad sequence spans
                    sp += 1 if ((b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2)) else 2
                else:
                    c = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    append(_REPLACEMENT if 0xD800 <= c <= 0xDFFF else chr(c))
                continue
            if sp < sl and ((b1 == 0xE0 and (src[sp] & 0xE0) == 0x80) or not _cont(src[sp])):
                append(_REPLACEMENT)
                continue
            append(_REPLACEMENT)
            break
        elif 0xF0 <= b1 <= 0xF7:
            if sp + 2 < sl:
                b2, b3, b4 = src[sp], src[sp + 1], src[sp + 2]
                sp += 3
                uc = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) | (b4 & 0x3F)
                if not (_cont(b2) and _cont(b3) and _cont(b4)) or not 0x10000 <= uc <= 0x10FFFF:
                    append(_REPLACEMENT)
                    sp -= 4
                    sp += _malformed4(src, sp)
                else:
                    append(chr(uc))
                continue
            if b1 > 0xF4 or (sp < sl and _malformed4_2(b1, src[sp])):
                append(_REPLACEMENT)
                continue
            sp += 1
            append(_REPLACEMENT)
            if sp < sl and not _cont(src[sp]):
                continue
            break
        else:
            append(_REPLACEMENT)
    return "".join(out)


def _malformed4_2(b1: int, b2: int) -> bool:
    return (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and (b2 & 0xF0) != 0x80) or not _cont(b2)


def _malformed4(src: bytes, sp: int) -> int:
    b1, b2 = src[sp], src[sp + 1]
    if b1 > 0xF4 or (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and (b2 & 0xF0) != 0x80) or not _cont(b2):
        return 1
    if not _cont(src[sp + 2]):
        return 2
    return 3


# -- hash codes ----------------------------------------------------------------------------


def integer_hash_code(value: int) -> int:
    """``Integer.hashCode``: the value itself."""
    return int32(value)


def long_hash_code(value: int) -> int:
    """``Long.hashCode``: the two halves of the 64 bits xor-ed, as an int."""
    unsigned = value & 0xFFFFFFFFFFFFFFFF
    return int32(unsigned ^ (unsigned >> 32))


def topic_partition_hash_code(tp: tuple[str, int]) -> int:
    """Kafka's ``TopicPartition.hashCode`` of a ``(topic, partition)`` pair:
    ``31 * (31 + partition) + topic.hashCode()``, as an int."""
    topic, partition = tp
    return int32(31 * (31 + partition) + string_hash_code(topic))


def spread(hash_code: int) -> int:
    """``HashMap.hash`` (Scala 2.13's ``improveHash`` too): ``h ^ (h >>> 16)``, unsigned, so
    the high bits reach the bucket index ``spread(h) & (capacity - 1)``."""
    h = hash_code & 0xFFFFFFFF
    return h ^ (h >> 16)


# -- iteration orders of hash tables -------------------------------------------------------


class HashOrder:
    """The iteration order of a ``java.util.HashMap`` (or ``HashSet``) built by ``add``/``remove``.

    Java iterates the table bucket by bucket. ``put`` appends a new key to its bucket's
    list, ``computeIfAbsent`` puts it at the head (``add(key, at_head=True)``); a resize
    splits buckets keeping the relative order, a removal unlinks. So the order is (bucket
    index, position in the bucket), where the bucket is ``spread(hash) & (capacity - 1)``
    for the table's current capacity, which only grows: 16 (``new HashMap<>()``), doubled
    whenever the size exceeds ``capacity * 0.75``. ``capacity`` starts a map whose table
    already has that size (a map that once held more keys keeps its table). Tree bins
    (9+ keys in one bucket of a 64+ table) are not modelled.
    """

    def __init__(self, hash_code: Callable[[Hashable], int], capacity: int = 0):
        self._hash_code = hash_code
        self._capacity = capacity
        self._threshold = capacity * 3 // 4
        self._entries: dict[Hashable, tuple[int, int]] = {}
        self._sequence = 0

    def add(self, key: Hashable, at_head: bool = False) -> None:
        """``put(key)``, or ``computeIfAbsent(key)`` with ``at_head``. Both leave an existing
        key where it is. ``put`` grows the table after inserting when the size passed the
        threshold; ``computeIfAbsent`` checks before looking the key up, on every call."""
        if at_head and (self._capacity == 0 or len(self._entries) > self._threshold):
            self._resize()
        if key in self._entries:
            return
        if self._capacity == 0:
            self._resize()
        # Positions: appended keys count up from 1, keys put at the head count down from -1,
        # so sorting by position gives the bucket's list order.
        self._sequence += 1
        self._entries[key] = (spread(self._hash_code(key)), -self._sequence if at_head else self._sequence)
        if not at_head and len(self._entries) > self._threshold:
            self._resize()

    def remove(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator:
        mask = self._capacity - 1
        entries = self._entries
        return iter(sorted(entries, key=lambda k: ((entries[k][0] & mask), entries[k][1])))

    def first(self) -> Hashable:
        return next(iter(self))

    def _resize(self) -> None:
        # HashMap.resize() of a default map: the first table has 16 buckets, then doubling.
        self._capacity = self._capacity << 1 if self._capacity else 16
        self._threshold = self._capacity * 3 // 4


def hash_map_order(keys: Iterable[K], hash_code: Callable[[K], int], capacity: int = 0) -> list[K]:
    """The iteration order of a ``HashMap`` (or ``HashSet``) after ``put`` of ``keys`` in this
    order (a repeated key keeps its first place), starting from a table of ``capacity``
    buckets (0: a new map)."""
    order = HashOrder(hash_code, capacity)
    for key in keys:
        order.add(key)
    return list(order)


def scala_hash_order(keys: Iterable[K], hash_code: Callable[[K], int], table_size: int) -> list[K]:
    """The iteration order of a Scala 2.13 ``mutable.HashMap``/``HashSet`` of ``table_size``
    buckets holding ``keys`` (insertion order, no repeats). Buckets iterate in index order;
    a bucket keeps its nodes sorted by the improved hash ``spread(hash)`` as a signed int,
    equal hashes in insertion order. When the table grows is the caller's: Scala's map and
    set, and the ways Kafka fills them, differ there."""
    mask = table_size - 1
    improved = [(int32(spread(hash_code(key))), index, key) for index, key in enumerate(keys)]
    improved.sort(key=lambda e: (e[0] & mask, e[0], e[1]))
    return [key for _, _, key in improved]


def hashtable_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of a ``java.util.Hashtable`` (Java <= 8 Properties) after putting ``keys``.

    Capacity 11, load factor 0.75; a new entry goes to the head of its chain; a rehash
    (capacity * 2 + 1) walks the old table from the last bucket down, re-heading every
    entry; enumeration runs from the last bucket down to bucket 0.
    """
    capacity, threshold, count = 11, 8, 0
    table: list[list[str]] = [[] for _ in range(capacity)]
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            continue  # an existing key keeps its place
        seen.add(key)
        if count >= threshold:
            new_capacity = capacity * 2 + 1
            new_table: list[list[str]] = [[] for _ in range(new_capacity)]
            for i in range(capacity - 1, -1, -1):
                for old in table[i]:
                    new_table[(string_hash_code(old) & 0x7FFFFFFF) % new_capacity].insert(0, old)
            table, capacity, threshold = new_table, new_capacity, int(new_capacity * 0.75)
        table[(string_hash_code(key) & 0x7FFFFFFF) % capacity].insert(0, key)
        count += 1
    return [key for i in range(capacity - 1, -1, -1) for key in table[i]]


def concurrent_hash_map_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of the ``ConcurrentHashMap`` inside Java 9-17 Properties.

    ``new Properties()`` sizes the map for 8 entries: a 16-bin table, resized (doubled) once
    the count reaches 3/4 of it. A new key goes to the tail of its bin; a resize splits each
    bin as ``ConcurrentHashMap.transfer`` does (the longest tail run that moves together
    keeps its order, the nodes before it are re-linked in reverse). Iteration is by bin
    index ascending. Treeification (bins of 8+, which also force an early resize) is not
    modelled: it needs 8 colliding keys.
    """
    n = 16
    table: list[list[tuple[int, str]]] = [[] for _ in range(n)]
    size_ctl = n - (n >> 2)
    count = 0
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            continue
        seen.add(key)
        h = spread(string_hash_code(key)) & 0x7FFFFFFF  # ConcurrentHashMap.spread: HASH_BITS
        table[h & (n - 1)].append((h, key))
        count += 1
        while count >= size_ctl:
            table = _transfer(table, n)
            size_ctl = (n << 1) - (n >> 1)
            n *= 2
    return [key for bin_ in table for _, key in bin_]


def _transfer(table: list[list[tuple[int, str]]], n: int) -> list[list[tuple[int, str]]]:
    """``ConcurrentHashMap.transfer`` of an ``n``-bin table into ``2n`` bins."""
    new_table: list[list[tuple[int, str]]] = [[] for _ in range(2 * n)]
    for i, bin_ in enumerate(table):
        if not bin_:
            continue
        last_run = len(bin_) - 1
        run_bit = bin_[-1][0] & n
        while last_run > 0 and bin_[last_run - 1][0] & n == run_bit:
            last_run -= 1
        low = bin_[last_run:] if run_bit == 0 else []
        high = bin_[last_run:] if run_bit != 0 else []
        for node in bin_[:last_run]:
            (low if node[0] & n == 0 else high).insert(0, node)
        new_table[i], new_table[i + n] = low, high
    return new_table
