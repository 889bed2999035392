"""Plain runs: ``plog produce`` with its options read here, without Typer.

Importing Typer (with the Click it vendors) and building a command from its declarations
costs about 20 ms, a tenth of a 1 M-line ``plog produce --file``. A run whose arguments are
all *plain* is read here instead and goes straight to ``cli/produce_run.py``: ``produce``
first (no root option before it), then options of ``produce_run.PLAIN_OPTIONS`` in the forms Click
reads them (``--opt value``, ``--opt=value``, ``-o value``, a flag alone), at most one TOPIC,
values Click would take. Anything else (``--help``, an unknown option, ``-qv``, ``-pVALUE``,
``--``, a value Click refuses) is not plain: :func:`plain_command` returns None and Click
parses the run, saying what is wrong as it always has. A value only the command's own checks
refuse (``--acks x``) is handed to Click too, before anything is opened.

What this module reads must be what Click gives the command: ``tests/cli/test_plain.py``
checks ``produce_run.PLAIN_OPTIONS`` against the Typer command's parameters, and for generated
argument lists that the two read them alike.
"""

from __future__ import annotations

import os
from enum import Enum


class Text:
    """An option that takes a string (the last one given wins, as in Click)."""


class Int:
    """An option that takes an integer of at least ``minimum`` (Click's ``IntRange(min=)``)."""

    def __init__(self, minimum: int):
        self.minimum = minimum


class Choice:
    """An option that takes one of an ``Enum``'s values, exactly (Click's case-sensitive choice)."""

    def __init__(self, enum: type[Enum]):
        self.enum = enum


class Flag:
    """A flag: its option strings set True, ``off``'s (``--no-create``) False."""

    def __init__(self, off: tuple[str, ...] = ()):
        self.off = off


class Many:
    """A repeatable option taking a string: the list of the values given (None: none given)."""


class Option:
    """One option: the ``ProduceArgs`` field it sets, its option strings, what it takes, and
    the environment variable that gives its value when it is not on the command line."""

    def __init__(self, field: str, opts: tuple[str, ...], takes, envvar: str | None = None):
        self.field, self.opts, self.takes, self.envvar = field, opts, takes, envvar


# Click's boolean words (BoolParamType), for a flag's environment variable.
_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "off"})


def plain_command(argv: list[str]):
    """A function running ``plog ARGV`` without Click when ARGV is a plain ``produce`` run
    (see the module docstring), else None."""
    args = produce_args(argv)
    return None if args is None else lambda: _produce(argv, args)


def produce_args(argv: list[str]):
    """The ``produce_run.ProduceArgs`` of ``plog ARGV`` when ARGV is a plain ``produce`` run,
    else None."""
    if not argv or argv[0] != "produce":
        return None
    from .produce_run import PLAIN_OPTIONS as options
    from .produce_run import ProduceArgs, kcat_key_delimiter

    # kcat's -K<delim> first, as the Typer command reads it (produce._ProduceCommand).
    value_opts = {s for o in options if not isinstance(o.takes, Flag) for s in o.opts}
    read = read_options(kcat_key_delimiter(argv[1:], value_opts), options)
    if read is None:
        return None
    values, positional = read
    if len(positional) > 1:
        return None  # Click's "unexpected extra argument"
    return ProduceArgs(topic=positional[0] if positional else None, **values)


def _produce(argv: list[str], args) -> None:
    from .errors import ParamError
    from .produce_run import execute, prepare

    try:
        prepared = prepare(args)
    except ParamError:
        # Click's own words for it (the usage line, "Invalid value for '--acks'"): nothing has
        # been opened yet, so the Typer command runs from the start and says it.
        from . import produce  # noqa: F401 (registers the command)
        from .app import run_click

        run_click(argv)
        return
    execute(args, prepared)


def read_options(args: list[str], options) -> tuple[dict, list[str]] | None:
    """``args`` read as Click reads them with ``options``: (field -> value for each option
    given or set by its environment variable, the positional arguments), or None when an
    argument is not plain."""
    by_opt = {s: o for o in options for s in o.opts}
    off = {s: o for o in options if isinstance(o.takes, Flag) for s in o.takes.off}
    raw: dict[str, object] = {}
    positional: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg in off:
            raw[off[arg].field] = False
            continue
        if not arg.startswith("-") or arg == "-":
            if arg == "-":
                return None  # Click reads a lone "-" as an argument: not worth mirroring
            positional.append(arg)
            continue
        name, eq, attached = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        option = by_opt.get(name)
        if option is None:
            return None  # --help, an unknown option, -qv, -p3: Click's to read
        if isinstance(option.takes, Flag):
            if eq:
                return None  # "--quiet=x": Click's error
            raw[option.field] = True
            continue
        if eq:
            value = attached
        elif i < len(args):
            value, i = args[i], i + 1
        else:
            return None  # "Option requires an argument"
        if isinstance(option.takes, Many):
            raw.setdefault(option.field, []).append(value)
        else:
            raw[option.field] = value
    values = {}
    for option in options:
        if option.field in raw:
            value = _convert(option.takes, raw[option.field])
        elif option.envvar is not None and os.environ.get(option.envvar):
            value = _convert_env(option.takes, os.environ[option.envvar])
        else:
            continue
        if value is None:
            return None
        values[option.field] = value
    return values, positional


def _convert(takes, value):
    """``value`` as Click converts it for ``takes``, or None where Click would refuse it."""
    if isinstance(takes, (Flag, Many, Text)):
        return value
    if isinstance(takes, Int):
        try:
            number = int(value)
        except ValueError:
            return None
        return number if number >= takes.minimum else None
    if isinstance(takes, Choice):
        return takes.enum(value) if value in {m.value for m in takes.enum} else None
    raise TypeError(takes)


def _convert_env(takes, value: str):
    if isinstance(takes, Flag):
        word = value.strip().lower()
        return True if word in _TRUE else False if word in _FALSE else None
    if isinstance(takes, Text):
        return value
    return None  # no such option takes its value from the environment
