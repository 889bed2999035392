"""The ``plog`` root command, and :func:`main`, which runs it.

Every command module registers on :data:`app` when it is imported (``cli/main.py``
imports them all; the console script, ``cli/entry.py``, only the one being run).
:func:`main` runs the app inside the CLI's one error boundary (``cli/boundary.py``), which
turns typed errors into one-line messages and exit codes (``exit_codes.ExitCode``); Click's
own outcomes (usage errors, ``typer.Exit``) are translated here, inside it. A command that
ran to its end returns an ``exit_codes.Outcome`` (:func:`_outcome`), an error says its kind
(``boundary.exit_code_of``); no command chooses a number. Heavy modules (the engine, Rich,
pyspark) are imported inside the commands that need them, so start-up stays short.
"""

from __future__ import annotations

import os
import sys

import typer

from plog import __version__

from .boundary import exit_code_of, interrupted, one_line, silence_stdout  # noqa: F401 (one_line, exit_code_of: re-exported)
from .exit_codes import EPILOG, OUTCOME_EXIT_CODES, ExitCode, Outcome
from .registry import COMMAND_MODULES


class _PlogGroup(typer.core.TyperGroup):
    """The root group, listing commands in :data:`registry.COMMAND_MODULES` order rather than
    in the order modules happened to register them (Typer puts sub-groups last)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        rank = {name: i for i, name in enumerate(COMMAND_MODULES)}
        self.commands = dict(sorted(self.commands.items(), key=lambda kv: rank.get(kv[0], len(rank))))


def _outcome(outcome: Outcome | None, **_root_options) -> None:
    """What a command returned (an :class:`Outcome`; None is OK) as the exit status. Runs
    for every command, sub-commands of groups included, however the app is run (the
    console script, :func:`main`, Click's test runner): the exit status is decided here."""
    code = OUTCOME_EXIT_CODES[outcome] if isinstance(outcome, Outcome) else ExitCode.OK
    if code != ExitCode.OK:
        raise typer.Exit(code=code)


app = typer.Typer(
    cls=_PlogGroup,
    result_callback=_outcome,
    name="plog",
    help=(
        "plog: an embedded Kafka-compatible log engine and an offline toolkit for Apache Kafka "
        "log directories.\n\nExample: plog dump --print-data-log /var/lib/kafka/orders-0/00000000000000000000.log"
    ),
    epilog=EPILOG,
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        from plog.formats.native import describe  # loads the native core: only when asked

        typer.echo(f"plog {__version__}")
        typer.echo(f"implementation: {describe()}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
    debug: bool = typer.Option(False, "--debug", envvar="PLOG_DEBUG", help="Show a traceback on errors."),
    quiet: bool = typer.Option(False, "--quiet", "-q",
                               help="No progress bars and no status lines on stderr, for every command ($PLOG_QUIET)."),
    verbose: bool = typer.Option(False, "--verbose", "-v",
                                 help="At the end, the command's wall time, CPU time and peak memory on stderr."),
    no_color: bool = typer.Option(False, "--no-color", help="No colour or styles, even on a terminal (as NO_COLOR=1)."),
) -> None:
    # Environment variables, not globals: the commands' own options read them (envvar=) and
    # worker processes inherit them.
    if debug:
        os.environ["PLOG_DEBUG"] = "1"
    if quiet:
        os.environ["PLOG_QUIET"] = "1"
    if verbose:
        os.environ["PLOG_VERBOSE"] = "1"
    if no_color:
        os.environ["NO_COLOR"] = "1"


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app, turn errors into exit codes (``cli/boundary.py``).
    A plain run (``cli/plain.py``: ``plog produce`` with options it reads as Click would) skips
    Typer; anything else is Click's to parse."""
    from . import boundary
    from .plain import plain_command

    args = sys.argv[1:] if argv is None else list(argv)
    command = plain_command(args)
    boundary.run(args, command if command is not None else lambda: run_click(argv))


def run_click(argv: list[str] | None) -> None:
    """The app, with Click's own outcomes translated (``typer.Exit``, usage errors); the rest
    goes to :func:`boundary.guarded` around it."""
    try:
        # Without standalone mode Click returns (not raises) the code of a typer.Exit.
        code = _command()(args=argv, prog_name="plog", standalone_mode=False)
        if code == ExitCode.INTERRUPTED:
            # Typer turns a KeyboardInterrupt raised by a command into Exit(130) and returns
            # the code; no command raises Exit(130) itself, so this is Ctrl-C or SIGTERM
            # (signals.Terminated is a KeyboardInterrupt; boundary.interrupted tells them apart).
            interrupted()
        if isinstance(code, int) and code != 0:
            sys.exit(code)
    except SystemExit as e:
        # Typer answers a BrokenPipeError (`plog dump ... | head`) with sys.exit(1), after
        # wrapping stdout in Click's PacifyFlushWrapper: the reader went away, not an error.
        if e.code == 1 and type(sys.stdout).__name__ == "PacifyFlushWrapper":
            silence_stdout()
            sys.exit(ExitCode.OK)
        raise
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        print("plog: aborted", file=sys.stderr)
        sys.exit(ExitCode.INTERRUPTED)
    except _click_exception() as e:
        from .common import foreign_option_hint

        # kcat's and Kafka's tools' options plog has no use for (--bootstrap-server, -b): one hint line.
        hint = foreign_option_hint(getattr(e, "option_name", None))
        if hint is not None and type(e).__name__ == "NoSuchOption":
            hint = _hint_for_command(getattr(e, "ctx", None), hint)
            print(f"plog: error: {e.option_name}: {hint}", file=sys.stderr)
            sys.exit(ExitCode.USAGE)
        e.show()
        sys.exit(e.exit_code)


def _hint_for_command(ctx, hint: str) -> str:
    """``hint`` (use --data-dir) for a command that has --data-dir, or none of its own; a
    command that reads the files it is given (dump, lookup) is told to give them instead."""
    cmd = getattr(ctx, "command", None)
    params = getattr(cmd, "params", None) or []
    if any("--data-dir" in (getattr(p, "opts", None) or ()) for p in params):
        return hint
    names = [f"{p.metavar} {p.name}".upper() for p in params if type(p).__name__.endswith("Argument")]
    if any("PATH" in n or "FILE" in n for n in names):
        return ("plog works on files, not on a broker: give the files or directories to read as PATH "
                "(a segment, a partition folder, a Kafka log directory)")
    return hint


def _command():
    """The Click command for :data:`app` as registered so far, with readable metavars.

    Typer's Click would print a value's Python type (``--buffer-size <str>``) and an
    argument's Python name (``{topic}``); they are shown as in the man pages instead
    (``--buffer-size BUFFER_SIZE``, numbers as INT/FLOAT, ``{TOPIC}``). Choices keep
    Click's ``[a|b|c]``.
    """
    from typer._click.utils import make_default_short_help
    from typer.main import get_command

    from .metavars import option_metavar
    from .registry import SUMMARIES

    def fill(cmd) -> None:
        for name, sub in getattr(cmd, "commands", {}).items():
            # A group's list of commands: each one's line in full. Click would cut a help's
            # first sentence at about 45 characters with "..."; the root's commands have a
            # one-line summary (registry.SUMMARIES), the others their first sentence, wrapped.
            if sub.short_help is None:
                sub.short_help = (SUMMARIES.get(name) if cmd is root else None) \
                    or make_default_short_help(sub.help or "", 10_000)
        for p in cmd.params:
            if p.metavar is not None or getattr(p, "is_flag", False):
                continue
            if type(p).__name__.endswith("Argument"):
                # Typer would print the Python name (`[files]...`, `{topic}`).
                name = option_metavar(p)
                if p.nargs == -1:  # Click's spelling of "any number": [FILES]...
                    name = f"{name}..." if p.required else f"[{name}]..."
                p.metavar = name
            elif not getattr(p.type, "choices", None):
                p.metavar = option_metavar(p)
        for sub in getattr(cmd, "commands", {}).values():
            fill(sub)

    root = get_command(app)
    fill(root)
    return root


def _click_exception():
    from typer._click import exceptions  # Typer vendors Click (>= 0.26)

    return exceptions.ClickException


