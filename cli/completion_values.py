"""What the completion scripts ask for at TAB time: the topics, consumer groups, brokers and
partition folders of a data directory (``plog completions values KIND``).

Invariants: reads only (no lock, nothing written); imports neither Typer nor the engine's
write path, so :func:`fast_main` answers in a few tens of milliseconds (``cli/entry.py``
routes ``plog completions values ...`` here before anything heavy is imported); prints
nothing and exits 0 when the data directory is missing or unreadable, since a TAB press
must never print an error into the user's command line.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

KINDS = ("topic", "group", "broker", "partition")


def fast_main(args: list[str]) -> int | None:
    """``KIND [-d DIR | --data-dir DIR | --data-dir=DIR | -dDIR]``: print the values and
    return 0; None when ``args`` are anything else (the full CLI then handles them)."""
    if not args or args[0] not in KINDS:
        return None
    data_dir = os.environ.get("PLOG_DATA_DIR") or "plog-data"
    rest = args[1:]
    while rest:
        a = rest.pop(0)
        if a in ("-d", "--data-dir") and rest:
            data_dir = rest.pop(0)
        elif a.startswith("--data-dir="):
            data_dir = a.split("=", 1)[1]
        elif a.startswith("-d") and len(a) > 2:
            data_dir = a[2:]
        else:
            return None
    print_values(args[0], data_dir)
    return 0


def print_values(kind: str, data_dir: str) -> None:
    try:
        found = data_dir_values(kind, data_dir)
    except Exception:
        # A TAB press must not print a traceback into the command line; --debug shows it.
        if os.environ.get("PLOG_DEBUG"):
            raise
        return
    if found:
        sys.stdout.write("".join(f"{v}\n" for v in found))
        sys.stdout.flush()


def data_dir_values(kind: str, data_dir: str) -> list[str]:
    """The ``kind`` values of the data directory ``data_dir`` (a plog data directory, or a
    Kafka log directory as ``DataDir.open`` reads one), sorted; [] when there is none.
    Partition folders are ``data_dir`` (as typed) joined with their relative path; those of
    internal topics (``__consumer_offsets``...) are left out."""
    root = Path(data_dir)
    if not root.is_dir():
        return []
    meta = _cluster_json(root)
    kafka_dir = meta is None
    if kafka_dir and not _partition_dirs(root) and not (root / "meta.properties").is_file():
        return []  # neither a plog data directory nor a Kafka log directory
    if kind == "topic":
        if not kafka_dir:
            return sorted(str(t) for t in meta.get("topics", {}))
        # As DataDir does for a Kafka log directory: the topics of the current partition folders.
        return sorted({topic for topic, _p in (_partition_of(n) for n in _partition_dirs(root))
                       if topic != "__cluster_metadata"})
    if kind == "broker":
        if not kafka_dir:
            return [str(b["id"]) for b in sorted(meta.get("brokers", []), key=lambda b: int(b["id"]))]
        return [_kafka_node_id(root)]
    log_dirs = [root] if kafka_dir else [root / f"broker-{b['id']}" for b in meta.get("brokers", [])]
    if kind == "partition":
        # Internal topics' folders (50 of __consumer_offsets) would bury the user's own; they
        # still complete as files, since the folders listed are paths from the same place.
        out = []
        for log_dir in log_dirs:
            names = sorted((n for n in _partition_dirs(log_dir) if not n.startswith("__")), key=_partition_of)
            prefix = data_dir if log_dir == root else os.path.join(data_dir, log_dir.name)
            out.extend(os.path.join(prefix, n) for n in names)
        return out
    if kind == "group":
        return _group_ids(root, log_dirs, kafka_dir)
    raise ValueError(f"unknown kind {kind!r}")


def _cluster_json(root: Path) -> dict | None:
    try:
        with open(root / "cluster.json", "rb") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    return data if isinstance(data, dict) else {}


def _partition_dirs(log_dir: Path) -> list[str]:
    """Names of the current partition folders in ``log_dir`` (Kafka's naming rules)."""
    from plog.engine.errors import EngineError
    from plog.engine.storage.file_names import parse_partition_dir_name

    out = []
    try:
        entries = list(os.scandir(log_dir))
    except OSError:
        return []
    for e in entries:
        if not e.is_dir():
            continue
        try:
            _tp, state = parse_partition_dir_name(e.name)
        except EngineError:
            continue
        if state == "current":
            out.append(e.name)
    return out


def _partition_of(name: str) -> tuple[str, int]:
    topic, _, p = name.rpartition("-")
    return topic, int(p)


def _kafka_node_id(log_dir: Path) -> str:
    """The node id of meta.properties (``node.id``, ``broker.id`` in version 0); 0 without
    one, as ``DataDir`` says. Read with the formats layer's parser (already imported with
    the partition-folder names, so no cost at TAB time); a file a broker would refuse
    names no broker."""
    from plog.formats.checkpoints import parse_meta_properties

    try:
        data = (log_dir / "meta.properties").read_bytes()
    except OSError:
        return "0"
    return str(parse_meta_properties(data).node_id)


def _group_ids(root: Path, log_dirs: list[Path], kafka_dir: bool) -> list[str]:
    """Groups with live membership files (``groups/<hex id>.json``, engine.groups) and groups
    whose state still exists in ``__consumer_offsets`` (engine.group_offsets)."""
    from plog.engine.groups.committed_offsets import list_groups

    ids: set[str] = set()
    groups_dir = root / "groups"
    if not kafka_dir and groups_dir.is_dir():
        for name in os.listdir(groups_dir):
            if name.endswith(".json"):
                try:
                    ids.add(bytes.fromhex(name[:-5]).decode("utf-8"))
                except ValueError:
                    continue
    ids.update(list_groups([d for d in log_dirs if d.is_dir()]))
    # One value per line: a group id with a line break cannot be completed.
    return sorted(g for g in ids if g and "\n" not in g and "\r" not in g)
