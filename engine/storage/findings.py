"""What a check of Kafka's files reports: :class:`Finding` values, counted and capped.

The report model shared by the segment checks (:mod:`plog.engine.storage.segment_check`,
which ``plog recover`` runs on the segments it keeps) and ``plog verify``
(:mod:`plog.engine.inspect.verify`, whose docstring lists every check by name). A check
calls a :class:`Reporter`, which counts every finding in :class:`VerifyStats` and keeps at
most ``max_findings_per_check`` per file and check; :meth:`Reporter.overflow` summarises
the rest. While a segment of a known log directory is checked, the reporter's
:class:`Repair` appends to each damage finding what a broker's start-up does about it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Callable, NamedTuple

ERROR = "error"
WARNING = "warning"

#: 1 MiB + 64 KiB: a batch of Kafka's default max.message.bytes (1048588) fits in one read,
#: and the chunk stays in cache between the read's copy and the CRC pass (measured against
#: 512 KiB-8 MiB chunks: 2 MiB is ~10% slower per byte, 4 MiB ~20%, 8 MiB ~30%).
DEFAULT_CHUNK_SIZE = (1 << 20) + (64 << 10)
MIN_CHUNK_SIZE = 64 << 10

_NO_CAP = 1 << 80  # above any count of findings

Progress = Callable[[int], None]


class Finding(NamedTuple):
    """One problem (or warning) in one file."""

    severity: str  # "error" or "warning"
    check: str  # see plog.engine.inspect.verify's docstring
    path: str
    position: int | None  # byte position in ``path``
    offset: int | None  # Kafka offset concerned, when known
    message: str

    def format_text(self) -> str:
        """``path:position: severity[check]: message`` (linter style)."""
        where = self.path if self.position is None else f"{self.path}:{self.position}"
        return f"{where}: {self.severity}[{self.check}]: {self.message}"

    def to_dict(self) -> dict:
        return {"severity": self.severity, "check": self.check, "path": self.path,
                "position": self.position, "offset": self.offset, "message": self.message}


@dataclass(frozen=True)
class VerifyOptions:
    chunk_size: int = DEFAULT_CHUNK_SIZE  # bytes of .log read at a time (one reused buffer)
    max_findings_per_check: int = 100  # per file and check; the rest are counted; 0 = no limit


@dataclass
class VerifyStats:
    """What was checked and found. ``errors``/``warnings`` count every finding, shown or not."""

    log_dirs: int = 0
    partitions: int = 0
    segments: int = 0
    files: int = 0
    bytes: int = 0
    batches: int = 0
    errors: int = 0
    warnings: int = 0

    def add(self, other: "VerifyStats") -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class Reporter:
    """Counts every finding in ``stats`` and keeps at most ``cap`` per (file, check)."""

    def __init__(self, stats: VerifyStats, cap: int):
        self.stats = stats
        self.cap = cap if cap > 0 else _NO_CAP
        self.counts: dict = {}
        self.out: list[Finding] = []
        #: While a segment is checked: what a broker's start-up does about its damage
        #: (:class:`Repair`), said at the end of each damage finding; None: nothing is said.
        self.repair: Repair | None = None

    def __call__(self, severity: str, check: str, path: str, position: int | None, offset: int | None,
                 message: str) -> None:
        if severity == ERROR:
            self.stats.errors += 1
            if self.repair is not None:
                message += self.repair.note(check)
        else:
            self.stats.warnings += 1
        key = (path, check, severity)
        count = self.counts.get(key, 0) + 1
        self.counts[key] = count
        if count <= self.cap:
            self.out.append(Finding(severity, check, path, position, offset, message))

    def take(self) -> list[Finding]:
        out, self.out = self.out, []
        return out

    def overflow(self) -> list[Finding]:
        """One summary finding per (file, check) that went over the cap (not counted again)."""
        out = []
        for (path, check, severity), count in self.counts.items():
            if count > self.cap:
                out.append(Finding(severity, check, path, None, None,
                                   f"{count - self.cap} more {check} {severity}s in this file are not shown "
                                   f"({count} in all)"))
        self.counts.clear()
        return out


#: Damage a truncation of the .log repairs, and damage a rebuild of the indexes repairs.
LOG_DAMAGE = frozenset(("crc", "framing", "torn-tail", "not-a-segment", "offsets"))
INDEX_DAMAGE = frozenset(("index-entry", "index-sanity", "timeindex-order", "timeindex-entry",
                          "timeindex-timestamp", "txnindex-entry"))


class Repair(NamedTuple):
    """Whether a broker's start-up recovers one segment (``loader.startup_recovery``, the
    rule ``plog recover`` plans with), why not, and how many segments follow it."""

    at_startup: bool
    why_not: str
    later: int

    def note(self, check: str) -> str:
        """What a broker, and ``plog recover``, do about damage of this kind, as a clause
        appended to the finding's message ("" for checks recovery does not repair)."""
        if check in INDEX_DAMAGE:
            if self.at_startup:
                return "; a broker's start-up recovery rebuilds this index"
            return f"; a broker would not rebuild this index at start-up ({self.why_not}): plog recover --all does"
        if check not in LOG_DAMAGE:
            return ""
        if not self.at_startup:
            return (f"; a broker would not repair it at start-up ({self.why_not}): plog recover --all --salvage "
                    "quarantines the damaged bytes and keeps the rest (--all alone truncates the log here)")
        if check == "offsets":
            return ("; a broker's start-up recovery checks offsets only where it writes index entries and may keep "
                    "it: plog recover --salvage quarantines it")
        later = (f" and deletes the {self.later} later segment{'s' * (self.later != 1)}" if self.later else "")
        salvage = ("; plog recover --salvage keeps the valid batches after it" if check != "torn-tail" or self.later
                   else "")
        return f"; a broker's start-up recovery truncates the segment here{later}{salvage}"


def io_finding(rep: Reporter, path: str, e: OSError, what: str = "read") -> None:
    """A file that could not be read: a warning when it vanished (a running broker's
    retention deletes files), else an error."""
    if isinstance(e, FileNotFoundError):
        rep(WARNING, "io", path, None, None, f"the file vanished while being verified ({what})")
    else:
        rep(ERROR, "io", path, None, None, f"cannot {what} the file: {e.strerror or e}")


__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "ERROR",
    "Finding",
    "INDEX_DAMAGE",
    "LOG_DAMAGE",
    "MIN_CHUNK_SIZE",
    "Progress",
    "Repair",
    "Reporter",
    "VerifyOptions",
    "VerifyStats",
    "WARNING",
    "io_finding",
]
