"""Reading and comparing a partition folder's files in interop tests, without plog's code.

The checkpoint and index parsers here are deliberately small hand-written ones: the tests
that compare plog's files with a broker's must not judge plog with plog's own readers.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

#: (struct format, entry size) of Kafka's fixed-size index entries, by file suffix.
_ENTRY_LAYOUTS = {".index": (">ii", 8), ".timeindex": (">qi", 12), ".txnindex": (">hqqqq", 34)}


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """A log dir checkpoint (``recovery-point-offset-checkpoint`` ...): version 0, a count,
    then ``topic partition offset`` lines. A missing file is empty."""
    path = Path(path)
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    assert lines[0] == "0", f"{path}: version {lines[0]!r}"
    out = {}
    for line in lines[2: 2 + int(lines[1])]:
        topic, part, off = line.rsplit(" ", 2)
        out[(topic, int(part))] = int(off)
    assert len(out) == int(lines[1]), path
    return out


def write_offset_checkpoint(path: Path, entries: dict[tuple[str, int], int]) -> None:
    body = f"0\n{len(entries)}\n" + "".join(f"{t} {p} {o}\n" for (t, p), o in sorted(entries.items()))
    Path(path).write_text(body)


def read_epochs(path: Path) -> list[tuple[int, int]]:
    """``leader-epoch-checkpoint``: [(epoch, start offset)]; a missing file is empty."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [tuple(int(x) for x in line.split()) for line in lines[2: 2 + int(lines[1])]]


def partition_files(pdir: Path) -> dict[str, bytes]:
    """Every regular file of a partition folder, by name."""
    pdir = Path(pdir)
    return {n: (pdir / n).read_bytes() for n in sorted(os.listdir(pdir)) if (pdir / n).is_file()}


def index_entries(name: str, data: bytes) -> list[tuple]:
    """The entries of an ``.index``/``.timeindex``/``.txnindex`` (nothing for other files)."""
    for suffix, (fmt, size) in _ENTRY_LAYOUTS.items():
        if name.endswith(suffix):
            return [struct.unpack_from(fmt, data, i) for i in range(0, len(data) - size + 1, size)]
    return []


def describe_difference(name: str, a: bytes, b: bytes) -> str:
    """One paragraph saying how two versions of a file differ (plog = a, Kafka = b)."""
    lines = [f"{name}: plog {len(a)} bytes, Kafka {len(b)} bytes"]
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    lines.append(f"  first differing byte at {first}: plog {a[first:first + 16].hex()} / Kafka {b[first:first + 16].hex()}")
    ea, eb = index_entries(name, a), index_entries(name, b)
    if ea or eb:
        lines.append(f"  entries plog {len(ea)} / Kafka {len(eb)}; plog-only {sorted(set(ea) - set(eb))[:6]}, "
                     f"Kafka-only {sorted(set(eb) - set(ea))[:6]}")
    return "\n".join(lines)


def folder_differences(name: str, a: dict, b: dict, side_a: str = "plog has", side_b: str = "Kafka has") -> list[str]:
    """Files only one side has, then each common file that differs (see describe_difference)."""
    problems = []
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    if only_a or only_b:
        problems.append(f"{name}: files only {side_a} {only_a}, only {side_b} {only_b}")
    for f in sorted(set(a) & set(b)):
        if a[f] != b[f]:
            problems.append(f"{name}/" + describe_difference(f, a[f], b[f]))
    return problems


def first_difference(got: list, want: list, got_name: str = "plog", want_name: str = "want") -> str:
    """Where two record lists part: the first unequal pair, or the first extra/missing one."""
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return f"first difference at #{i}:\n  {got_name}: {g!r}\n  {want_name}: {w!r}"
    return (f"{got_name} has {len(got)} records, {want_name} {len(want)}; first extra/missing: "
            f"{(got[len(want):] or want[len(got):])[:1]!r}")
