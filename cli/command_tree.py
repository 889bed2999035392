"""The ``plog`` command tree as plain data, for the generators of completions, man pages
and the README's CLI reference (``cli/gendocs.py``).

Invariant: everything here is read from the Typer app itself (names, options, help,
choices, defaults), so generated files can only drift from the code by not being
regenerated, which the test suite checks.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .metavars import choices as _choices
from .metavars import option_metavar

# What a parameter's value names, for dynamic completion from the data directory. Keyed by
# the parameter's Python name (the same name means the same thing across commands).
VALUE_KINDS = {
    "topic": "topic", "topics": "topic", "names": "topic", "name": "topic",
    "group": "group", "groups": "group",
    "path": "path", "paths": "path", "files": "path", "files_opt": "file", "scenario": "file", "file": "file",
    "from_file": "file", "reassignment_json_file": "file", "topics_to_move_json_file": "file",
    "server_properties": "file", "output": "file",
    "data_dir": "dir",
    "broker_id": "broker",
}


@dataclass(frozen=True)
class ParamDoc:
    name: str  # the Python name
    opts: tuple[str, ...]  # "--format", "-f"; empty for an argument
    help: str
    is_argument: bool
    is_flag: bool
    multiple: bool  # may repeat (options) or take several values (arguments)
    required: bool
    choices: tuple[str, ...]  # enum values, or ()
    metavar: str  # what the value is called in usage lines (FORMAT, TOPIC, PATH...)
    default: str | None  # as shown in help, None when there is none worth showing
    envvar: str | None
    hidden: bool
    value_kind: str | None  # "topic", "group", "path", "file", "dir", "broker" or None

    @property
    def takes_value(self) -> bool:
        return not self.is_flag


@dataclass(frozen=True)
class CommandDoc:
    path: tuple[str, ...]  # ("topics", "create"); () for plog itself
    help: str
    epilog: str
    params: tuple[ParamDoc, ...]
    subcommands: tuple["CommandDoc", ...] = field(default=())
    hidden: bool = False

    @property
    def name(self) -> str:
        return " ".join(("plog",) + self.path)

    @property
    def is_group(self) -> bool:
        return bool(self.subcommands)

    @property
    def summary(self) -> str:
        """The first sentence of the help text (what listings show)."""
        first = (self.help or "").strip().split("\n\n")[0]
        return " ".join(first.split())

    @property
    def examples(self) -> list[str]:
        """Command lines in the help text and epilog that start with ``plog``."""
        lines = (self.help or "").splitlines() + (self.epilog or "").splitlines()
        out = []
        for line in lines:
            s = line.strip()
            if s.lower().startswith("example:"):
                s = s.split(":", 1)[1].strip()
            if s.startswith("plog ") or s.startswith("$ plog "):
                out.append(s.removeprefix("$ "))
        return out

    def walk(self):
        """This command and every command under it, depth first, in registration order."""
        yield self
        for sub in self.subcommands:
            yield from sub.walk()

    def leaves(self):
        return [c for c in self.walk() if not c.is_group and c.path]


def _default(p) -> str | None:
    d = p.default
    if d is None or d is False or d == () or d == []:
        return None
    if callable(d):
        return None
    if isinstance(d, enum.Enum):
        return str(d.value)
    return str(d)


def _param(p) -> ParamDoc:
    is_argument = type(p).__name__.endswith("Argument")
    choices = _choices(p)
    multiple = bool(getattr(p, "multiple", False)) or p.nargs == -1
    is_flag = bool(getattr(p, "is_flag", False))
    return ParamDoc(
        name=p.name,
        opts=() if is_argument else tuple(p.opts) + tuple(getattr(p, "secondary_opts", ()) or ()),
        help=" ".join((getattr(p, "help", None) or "").split()),
        is_argument=is_argument,
        is_flag=is_flag,
        multiple=multiple,
        required=bool(p.required),
        choices=choices,
        metavar=option_metavar(p),
        default=None if is_flag else _default(p),
        envvar=p.envvar if isinstance(p.envvar, str) else None,
        hidden=bool(getattr(p, "hidden", False)),
        value_kind=VALUE_KINDS.get(p.name),
    )


def _doc(cmd, path: tuple[str, ...]) -> CommandDoc:
    subs = ()
    if hasattr(cmd, "commands"):
        subs = tuple(_doc(sub, path + (name,)) for name, sub in cmd.commands.items())
    return CommandDoc(
        path=path,
        help=cmd.help or "",
        epilog=cmd.epilog or "",
        params=tuple(_param(p) for p in cmd.params),
        subcommands=subs,
        hidden=bool(getattr(cmd, "hidden", False)),
    )


def command_tree() -> CommandDoc:
    """The whole ``plog`` tree, root first."""
    from typer.main import get_command

    from .main import app

    return _doc(get_command(app), ())
