"""What an option's value is called in ``--help``, the man pages and the completions
(``--format FORMAT``, ``--max-bytes INT``), read from a Click parameter of the Typer app.
Kept apart from ``command_tree`` so a run of one command can use it cheaply."""

from __future__ import annotations


def choices(p) -> tuple[str, ...]:
    # Typer turns an Enum annotation into a Click Choice of the members' values.
    values = getattr(p.type, "choices", None)
    return tuple(str(getattr(c, "value", c)) for c in values) if values else ()


def _number_kind(p) -> str | None:
    """INT or FLOAT for a number parameter (ranges included), else None. Typer's Click
    names its number types ``int``/``float`` (ranges: ``int range``/``float range``);
    older Click said ``integer``."""
    name = getattr(p.type, "name", "")
    if name.startswith(("int", "integer")):
        return "INT"
    if name.startswith("float"):
        return "FLOAT"
    return None


def option_metavar(p) -> str:
    """What a parameter's value is called in usage lines and help: an explicit metavar, a
    number's INT/FLOAT, else the option as users type it (``--format FORMAT``), not the
    Python name."""
    if p.metavar:
        return p.metavar.strip("[]. ") or p.name.upper()
    is_argument = type(p).__name__.endswith("Argument")
    longest = max(p.opts, key=len) if not is_argument and p.opts else p.name
    word = longest.lstrip("-").replace("-", "_").upper()
    if choices(p):
        return word
    return _number_kind(p) or word
