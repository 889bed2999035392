"""One way to print listings and reports: ``--format table|text|json|jsonl|csv``.

Data goes to stdout only; the table is Rich's, plain (no colour, no box-drawing styles)
when stdout is not a terminal or ``NO_COLOR`` is set. JSON field names are the row keys,
the same across commands.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from enum import Enum
from typing import Any, Sequence


class ListFormat(str, Enum):
    table = "table"
    json = "json"
    jsonl = "jsonl"
    csv = "csv"


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


def emit(rows: Sequence[dict], fmt: ListFormat, columns: Sequence[str], *, out=None,
         titles: dict[str, str] | None = None, right: Sequence[str] = ()) -> None:
    """Print ``rows`` (dicts with at least ``columns``) in ``fmt``."""
    out = out or sys.stdout
    if fmt is ListFormat.json:
        out.write(json.dumps(list(rows), indent=2, ensure_ascii=False) + "\n")
    elif fmt is ListFormat.jsonl:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
    elif fmt is ListFormat.csv:
        w = csv.writer(out, lineterminator="\n")
        w.writerow(columns)
        for row in rows:
            w.writerow(["" if row.get(c) is None else _cell(row.get(c)) for c in columns])
    else:
        render_table(rows, columns, out=out, titles=titles, right=right)
    out.flush()


def render_table(rows, columns, *, out=None, titles=None, right=()) -> None:
    from rich.console import Console
    from rich.table import Table

    out = out or sys.stdout
    tty = out.isatty() and not os.environ.get("NO_COLOR")
    console = Console(file=out, width=None if tty else 10_000, no_color=not tty, highlight=False,
                      soft_wrap=False, color_system="auto" if tty else None, force_terminal=tty)
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold" if tty else "")
    for c in columns:
        table.add_column((titles or {}).get(c, c.upper()), justify="right" if c in right else "left", no_wrap=True)
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in columns))
    console.print(table)


def parse_key_values(items: Sequence[str] | None, what: str = "--config") -> dict[str, str]:
    """``["k=v", ...]`` (also ``k=v,k2=v2``) as a dict; a usage error names the bad item."""
    import typer

    out: dict[str, str] = {}
    for item in items or []:
        for part in item.split(",") if "=" in item and "," in item else [item]:
            if "=" not in part:
                raise typer.BadParameter(f"expected key=value, got {part!r}", param_hint=what)
            k, v = part.split("=", 1)
            if not k.strip():
                raise typer.BadParameter(f"empty key in {part!r}", param_hint=what)
            out[k.strip()] = v
    return out
