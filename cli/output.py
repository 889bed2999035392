"""One way to print listings and reports, for every command.

Listings (rows of the same columns) take ``--format table|text|json|jsonl|csv``:
``table`` aligned columns with a header (the default), ``text`` the same cells
tab-separated without a header and ``-`` for an empty cell (for ``cut``/``awk``),
``json`` one array, ``jsonl`` one object per line, ``csv`` with a header row. Reports (one
document: a plan, a recovery report) take ``--format text|json|jsonl``: ``jsonl`` is the
same document as ``json`` on a single line, so runs append to a log file line by line.

Invariants: data goes to stdout only; JSON field names are the row keys, the same
snake_case names across commands; JSON is UTF-8 text (byte fields are encoded by the
commands that have them, never written raw); colour only when :func:`use_color` says so.
"""

from __future__ import annotations

import io
import json
import os
import sys
from enum import Enum
from typing import Any, Sequence


class ListFormat(str, Enum):
    table = "table"
    text = "text"
    json = "json"
    jsonl = "jsonl"
    csv = "csv"


class ReportFormat(str, Enum):
    text = "text"
    json = "json"
    jsonl = "jsonl"


LIST_FORMAT_HELP = ("Output format: table (aligned, with a header), text (tab-separated, no header, "
                    "for cut/awk), json, jsonl (one object per line) or csv.")
REPORT_FORMAT_HELP = "Output format: text (for people), json, or jsonl (the JSON document on one line)."


def list_format_option(default: ListFormat = ListFormat.table):
    import typer

    return typer.Option(default, "--format", "-f", case_sensitive=False, help=LIST_FORMAT_HELP)


def report_format_option(default: ReportFormat = ReportFormat.text):
    import typer

    return typer.Option(default, "--format", "-f", case_sensitive=False, help=REPORT_FORMAT_HELP)


def use_color(stream) -> bool:
    """Colour (and other terminal styling) only on a terminal, never with ``NO_COLOR`` set
    (present is enough, as no-color.org first said), ``--no-color`` or ``TERM=dumb``."""
    if os.environ.get("NO_COLOR") is not None or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def emit_document(doc: Any, fmt: ReportFormat, *, out=None) -> None:
    """A report's JSON document: indented for ``json``, one line for ``jsonl``."""
    out = out or sys.stdout
    if fmt is ReportFormat.jsonl or fmt is ListFormat.jsonl:
        out.write(json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n")
    else:
        out.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    out.flush()


class JsonArrayWriter:
    """One JSON array streamed as its elements come (``dump --format json``, ``consume
    --format json``): ``[``, the elements (JSON text, already encoded) separated by ``,`` and
    a line break, then ``\\n]\\n``; ``[]\\n`` when there is none. :meth:`close` ends the array
    even after an error, so what was written is always one JSON document.

    ``write`` takes ``str`` (or ``bytes`` with ``binary``: elements are then bytes too);
    ``break_first``: the first element on a line of its own, after ``[``."""

    def __init__(self, write, *, binary: bool = False, break_first: bool = False):
        def text(s: str):
            return s.encode() if binary else s

        self._write = write
        self._first = text("[\n" if break_first else "[")
        self._between = text(",\n")
        self._empty, self._end = text("[]\n"), text("\n]\n")
        self.started = False

    def add(self, element) -> None:
        """Write ``element`` (JSON text); one call a record, so after the first the instance's
        ``add`` is a closure that only writes the separator and the element."""
        self._write(self._first + element)
        self.started = True
        write, between = self._write, self._between
        self.add = lambda element: write(between + element)

    def close(self) -> None:
        self._write(self._end if self.started else self._empty)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_cell(v) for v in value)
    if isinstance(value, dict):
        return ",".join(f"{k}={_cell(v)}" for k, v in value.items())
    return str(value)


_CONTROL = {c: " " for c in range(32)} | {127: " "}


def _text_cell(value: Any) -> str:
    # One field per column whatever the value holds: a tab or a newline would split it,
    # other control characters would reach the terminal.
    return _cell(value).translate(_CONTROL) or "-"


def emit(rows: Sequence[dict], fmt: ListFormat, columns: Sequence[str], *, out=None,
         titles: dict[str, str] | None = None, right: Sequence[str] = (),
         optional: Sequence[str] = ()) -> list[str]:
    """Print ``rows`` (dicts with at least ``columns``) in ``fmt``. ``optional``: columns a
    table may leave out, the least needed first, to fit :func:`table_width` (the other
    formats keep every column). Returns the columns left out."""
    out = out or sys.stdout
    left_out: list[str] = []
    if fmt is ListFormat.json:
        out.write(json.dumps(list(rows), indent=2, ensure_ascii=False) + "\n")
    elif fmt is ListFormat.jsonl:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
    elif fmt is ListFormat.text:
        for row in rows:
            out.write("\t".join(_text_cell(row.get(c)) for c in columns) + "\n")
    elif fmt is ListFormat.csv:
        import csv  # (here: csv output only; every command imports this module)

        w = csv.writer(out, lineterminator="\n")
        w.writerow(columns)
        for row in rows:
            w.writerow(["" if row.get(c) is None else _cell(row.get(c)) for c in columns])
    else:
        if optional:
            shown = fit_columns(rows, columns, optional, table_width(out), titles=titles)
            left_out = [c for c in columns if c not in shown]
            columns = shown
        render_table(rows, columns, out=out, titles=titles, right=right)
    out.flush()
    return left_out


#: Gap between two table columns (Rich's default padding, as render_table draws it).
_GAP = 2


def table_width(out) -> int | None:
    """The width a table on ``out`` must fit when ``out`` is a terminal: ``$COLUMNS`` when
    set (as ``shutil.get_terminal_size`` reads it), else the terminal's. None when ``out`` is
    not a terminal: a pipe or a file has no width, and what reads it gets every column."""
    try:
        if not out.isatty():
            return None
        columns = os.environ.get("COLUMNS", "")
        if columns.isdigit() and int(columns) > 0:
            return int(columns)
        return os.get_terminal_size(out.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return None


def fit_columns(rows: Sequence[dict], columns: Sequence[str], optional: Sequence[str], width: int | None, *,
                titles: dict[str, str] | None = None) -> list[str]:
    """``columns`` without the ``optional`` ones (the least needed first) that the table must
    leave out to be at most ``width`` cells wide (None: no limit): they go in that order
    until the rest fits, then each that fits again comes back, the most needed first (a
    wide column that had to go leaves room for narrower ones). Columns not in ``optional``
    always stay, even when the table is still wider. The order of ``columns`` is kept."""
    from rich.cells import cell_len

    if width is None:
        return list(columns)
    need = {c: max([cell_len((titles or {}).get(c, c.upper()))]
                   + [cell_len(_cell(r.get(c)).translate(_CONTROL)) for r in rows]) for c in columns}

    def fits(cols) -> bool:
        return sum(need[c] for c in cols) + _GAP * (len(cols) - 1) <= width

    shown = set(columns)
    dropped = []
    for c in optional:
        if fits(shown):
            break
        if c in shown:
            shown.discard(c)
            dropped.append(c)
    for c in reversed(dropped):
        if fits(shown | {c}):
            shown.add(c)
    return [c for c in columns if c in shown]


def render_table(rows, columns, *, out=None, titles=None, right=()) -> None:
    from rich.console import Console
    from rich.table import Table

    out = out or sys.stdout
    color = use_color(out)
    buf = io.StringIO()
    # Rendered off-screen at any width (no wrapping, no truncation: a pipe has no width),
    # then written without the padding Rich leaves at the end of each line.
    console = Console(file=buf, width=10_000, no_color=not color, highlight=False, soft_wrap=False,
                      color_system="standard" if color else None, force_terminal=color, emoji=False,
                      markup=False)
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold" if color else "")
    for c in columns:
        table.add_column((titles or {}).get(c, c.upper()), justify="right" if c in right else "left", no_wrap=True)
    for row in rows:
        table.add_row(*(_cell(row.get(c)).translate(_CONTROL) for c in columns))
    console.print(table)
    out.write("".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines()))


def parse_key_values(items: Sequence[str] | None, what: str = "--config") -> dict[str, str]:
    """:func:`key_values` for a command run by Click: a bad item is Click's usage error."""
    from .errors import ParamError

    try:
        return key_values(items, what)
    except ParamError as e:
        raise e.bad_parameter() from None


def key_values(items: Sequence[str] | None, what: str = "--config") -> dict[str, str]:
    """``["k=v", ...]`` (also ``k=v,k2=v2``) as a dict; a ``ParamError`` names the bad item."""
    from .errors import ParamError

    out: dict[str, str] = {}
    for item in items or []:
        for part in item.split(",") if "=" in item and "," in item else [item]:
            if "=" not in part:
                raise ParamError(f"expected key=value, got {part!r}", what)
            k, v = part.split("=", 1)
            if not k.strip():
                raise ParamError(f"empty key in {part!r}", what)
            out[k.strip()] = v
    return out


def status(message: str) -> None:
    """A status line for people (what was done), on stderr; silent under ``--quiet``."""
    from .common import is_quiet

    if not is_quiet():
        print(message, file=sys.stderr)
