"""``plog completions show|install``: shell completions for bash, zsh and fish.

The scripts are rendered at run time from the command tree (``cli/completion_scripts.py``),
so an installed package needs no data files and a script always matches the commands of
the ``plog`` that prints it. ``completions/`` in the repository holds the same scripts,
checked in (``python -m plog.cli.gendocs`` regenerates them).

``plog completions values KIND`` (hidden) is what the scripts run at TAB time for topic,
group and broker names and partition folders. Invariants: it never writes, never takes a
lock, prints nothing and exits 0 when the data directory is missing or unreadable (a TAB
press must never print an error into the user's command line), and imports only what the
kind needs (cluster.json is read as plain JSON; only group names replay ``__consumer_offsets``).
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from .common import data_dir_option
from .errors import CliUsageError, PlogCliError
from .app import app

completions_app = typer.Typer(
    help="Shell completions for bash, zsh and fish: commands, options, choices, and topic, group and "
         "broker names and partition folders from the data directory.\n\n"
         "Example: plog completions install",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)
app.add_typer(completions_app, name="completions")


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


class ValueKind(str, Enum):
    topic = "topic"
    group = "group"
    broker = "broker"
    partition = "partition"


ZSH_RC_LINE = "fpath+=~/.zfunc; autoload -Uz compinit; compinit"


# -- show ----------------------------------------------------------------------------------------


@completions_app.command(
    "show",
    epilog="Examples:\n\n  plog completions show bash > ~/.local/share/bash-completion/completions/plog\n\n"
           "  source <(plog completions show bash)\n\n"
           "The script is generated from this plog's own commands; plog completions install writes it "
           "where the shell looks for it.\n\n"
           "Exit status: 0 success, 2 usage error (unknown shell).",
)
def show(shell: Shell = typer.Argument(..., help="bash, zsh or fish.")) -> None:
    """Print the completion script for a shell on stdout."""
    sys.stdout.write(_script(shell))


def _script(shell: Shell) -> str:
    from .command_tree import command_tree
    from .completion_scripts import render

    return render(shell.value, command_tree())


# -- install -------------------------------------------------------------------------------------


@completions_app.command(
    "install",
    epilog="Examples:\n\n  plog completions install\n\n  plog completions install zsh\n\n"
           "  plog completions install bash --path ~/.bash_completion.d/plog\n\n"
           "Where each shell looks for it: bash, $XDG_DATA_HOME/bash-completion/completions/plog "
           "(default ~/.local/share/...; loaded by the bash-completion package, or source it from ~/.bashrc); "
           f"zsh, ~/.zfunc/_plog (with '{ZSH_RC_LINE}' in ~/.zshrc); fish, "
           "$XDG_CONFIG_HOME/fish/completions/plog.fish (default ~/.config/...). The file is replaced "
           "atomically; the path written is printed on stderr. Start a new shell to use it.\n\n"
           "Exit status: 0 success, 1 error (cannot write the file), 2 usage error (unknown shell).",
)
def install(
    shell: Optional[Shell] = typer.Argument(None, help="bash, zsh or fish (default: the basename of $SHELL)."),
    file: Optional[Path] = typer.Option(None, "--path", help="Write here instead of the shell's standard place.",
                                        dir_okay=False),
) -> None:
    """Install the completion script for your shell, for your user."""
    # The Python name ``file`` (not ``path``) makes the command tree complete --path as a file.
    chosen = shell if shell is not None else _shell_from_env()
    target = file if file is not None else default_install_path(chosen)
    _atomic_write(target, _script(chosen))
    print(f"plog: wrote {chosen.value} completions to {target}", file=sys.stderr)
    if chosen is Shell.zsh and file is None and not _zshrc_has_fpath():
        print(f"plog: add this line to ~/.zshrc, then start a new shell: {ZSH_RC_LINE}", file=sys.stderr)
    elif chosen is Shell.bash and file is None:
        print(f"plog: new shells load it through the bash-completion package; without it, add "
              f"'source {target}' to ~/.bashrc", file=sys.stderr)


def _shell_from_env() -> Shell:
    name = os.path.basename(os.environ.get("SHELL", "").rstrip("/"))
    try:
        return Shell(name)
    except ValueError:
        shown = f"$SHELL is {name!r}" if name else "$SHELL is not set"
        raise CliUsageError(f"cannot tell which shell to install for ({shown}): give one of bash, zsh, fish") from None


def default_install_path(shell: Shell) -> Path:
    """The per-user file each shell loads completions from (XDG base directories where the
    shell follows them: a relative or empty XDG variable is ignored, as the spec says)."""
    home = Path.home()
    if shell is Shell.bash:
        return _xdg("XDG_DATA_HOME", home / ".local" / "share") / "bash-completion" / "completions" / "plog"
    if shell is Shell.zsh:
        return home / ".zfunc" / "_plog"
    return _xdg("XDG_CONFIG_HOME", home / ".config") / "fish" / "completions" / "plog.fish"


def _xdg(var: str, default: Path) -> Path:
    value = os.environ.get(var, "")
    return Path(value) if value and os.path.isabs(value) else default


def _zshrc_has_fpath() -> bool:
    """Whether ~/.zshrc already adds ~/.zfunc to fpath and runs compinit (then no hint)."""
    zdotdir = os.environ.get("ZDOTDIR") or str(Path.home())
    try:
        text = Path(zdotdir, ".zshrc").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return ".zfunc" in text and "compinit" in text


def _atomic_write(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` through a temporary file in the same directory and a
    rename, so a shell starting meanwhile reads the old script or the new one, never half."""
    target = target.expanduser()
    if target.is_dir():
        raise PlogCliError(f"{target} is a directory (give --path a file name)")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        # mkdir's "File exists" for `--path some-file/name` says nothing useful.
        blocker = next(p for p in [target.parent, *target.parent.parents] if p.exists())
        raise PlogCliError(f"cannot install to {target}: {blocker} is not a directory") from None
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.filename == str(tmp):
            # Name the file the user asked for, not our temporary.
            raise OSError(e.errno, e.strerror, str(target)) from None
        raise


# -- values (hidden: what the scripts run at TAB time) ---------------------------------------------


@completions_app.command(
    "values",
    hidden=True,
    epilog="Example: plog completions values topic --data-dir plog-data\n\n"
           "Run by the completion scripts at TAB time: one value per line, nothing (exit 0) when the data "
           "directory does not exist or cannot be read. topic: the topics; group: consumer group ids; "
           "broker: broker ids; partition: partition folders (not those of internal topics), as paths under "
           "--data-dir.",
)
def values(
    kind: ValueKind = typer.Argument(..., help="topic, group, broker or partition."),
    data_dir: str = data_dir_option(),
) -> None:
    """Print the topics, groups, brokers or partition folders of a data directory, one per line."""
    # `plog completions values ...` normally never gets here: cli/entry.py answers it before
    # Typer is imported. This path serves in-process calls of plog.cli.main.main and unusual
    # spellings (`plog -q completions values topic`).
    from .completion_values import print_values

    print_values(kind.value, data_dir)
