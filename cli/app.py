"""The ``plog`` root command and the CLI's one error boundary.

Every command module registers on :data:`app` when it is imported (``cli/main.py``
imports them all; the console script, ``cli/entry.py``, only the one being run).
:func:`main` runs the app and translates typed errors into one-line messages and exit
codes (``exit_codes.ExitCode``) in this one place: a command that ran to its end returns an
``exit_codes.Outcome`` (:func:`_outcome`), an error says its kind (:func:`exit_code_of`);
no command chooses a number. Heavy modules (the engine, Rich,
pyspark) are imported inside the commands that need them, so start-up stays short.
"""

from __future__ import annotations

import os
import sys
import time

import typer

from plog import __version__

from .exit_codes import EPILOG, KIND_EXIT_CODES, OUTCOME_EXIT_CODES, ExitCode, Outcome
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


# What the root options set for the length of one run (the commands' options and worker
# processes read them); put back afterwards, so an embedding process (the tests call main()
# in-process) does not inherit `plog --quiet` from an earlier call.
_RUN_ENV = ("PLOG_DEBUG", "PLOG_QUIET", "PLOG_VERBOSE", "NO_COLOR")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app, turn errors into exit codes."""
    from .signals import handle_sigterm, restore

    saved = {k: os.environ.get(k) for k in _RUN_ENV}
    started = time.monotonic()
    # SIGTERM stops the command as Ctrl-C does (cli/signals.py), for every command at once.
    previous_sigterm = handle_sigterm()
    try:
        _run(argv)
    finally:
        _verbose_summary(argv if argv is not None else sys.argv[1:], started)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        restore(previous_sigterm)


def _run(argv: list[str] | None) -> None:
    # The one root of every typed error (formats, engine, Spark, CLI): formats is the
    # lowest layer, so it defines it, and importing it costs nothing at start-up.
    from plog.formats.errors import PlogError

    try:
        # Without standalone mode Click returns (not raises) the code of a typer.Exit.
        code = _command()(args=argv, prog_name="plog", standalone_mode=False)
        if code == ExitCode.INTERRUPTED:
            # Typer turns a KeyboardInterrupt raised by a command into Exit(130) and returns
            # the code; no command raises Exit(130) itself, so this is Ctrl-C or SIGTERM
            # (signals.Terminated is a KeyboardInterrupt; _interrupted tells them apart).
            _interrupted()
        if isinstance(code, int) and code != 0:
            sys.exit(code)
    except KeyboardInterrupt:
        _interrupted()
    except SystemExit as e:
        # Typer answers a BrokenPipeError (`plog dump ... | head`) with sys.exit(1), after
        # wrapping stdout in Click's PacifyFlushWrapper: the reader went away, not an error.
        if e.code == 1 and type(sys.stdout).__name__ == "PacifyFlushWrapper":
            _silence_stdout()
            sys.exit(ExitCode.OK)
        raise
    except BrokenPipeError:
        # `plog dump ... | head`: the reader went away; that is not an error.
        _silence_stdout()
        sys.exit(ExitCode.OK)
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
    except (PlogError, OSError) as e:
        if os.environ.get("PLOG_DEBUG"):
            raise
        print(f"plog: error: {one_line(e)}", file=sys.stderr)
        sys.exit(exit_code_of(e))
    except Exception as e:  # a bug: still one line, the traceback with --debug
        if os.environ.get("PLOG_DEBUG"):
            raise
        print(f"plog: internal error: {type(e).__name__}: {one_line(e)} (run with --debug for a traceback)",
              file=sys.stderr)
        sys.exit(ExitCode.ERROR)


def exit_code_of(error: BaseException) -> int:
    """The exit status of a run that ends with ``error``: its ``kind``
    (``PlogError.kind``) in :data:`exit_codes.KIND_EXIT_CODES` (a usage error is 2); an
    error that rewords another (``like``: produce's "... (N records before it)") exits as
    that one. An ``exit_code`` an error class sets itself (code written before kinds, which
    a library user may still have) wins over the default kind; anything else exits 1."""
    like = getattr(error, "like", None)
    if isinstance(like, BaseException):
        return exit_code_of(like)
    code = getattr(error, "exit_code", None)
    if isinstance(code, int):
        return code
    kind = getattr(error, "kind", None)
    if isinstance(kind, str) and kind in KIND_EXIT_CODES:
        return KIND_EXIT_CODES[kind]
    return ExitCode.ERROR


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


def _verbose_summary(argv: list[str], started: float) -> None:
    """``plog --verbose``: what the run cost, on stderr, however it ended."""
    if not os.environ.get("PLOG_VERBOSE"):
        return
    import resource

    words = [a for a in argv if not a.startswith("-")][:2]
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    wall = time.monotonic() - started
    rss_mib = max(me.ru_maxrss, kids.ru_maxrss) / 1024  # Linux: KiB
    try:
        print(f"plog {' '.join(words)}: {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS {rss_mib:.0f} MiB",
              file=sys.stderr)
    except (OSError, ValueError):
        pass


def _click_exception():
    from typer._click import exceptions  # Typer vendors Click (>= 0.26)

    return exceptions.ClickException


def _interrupted() -> None:
    """Ctrl-C: one line on stderr, exit 130; SIGTERM (the same clean stop, cli/signals.py):
    ``plog: terminated``, exit 143. Output already written stays (it is complete lines of
    data); a stdout that cannot take the rest is silenced so the interpreter's final flush
    cannot add a second message."""
    from .signals import terminated

    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        _silence_stdout()
    if terminated():
        print("plog: terminated", file=sys.stderr)
        sys.exit(ExitCode.TERMINATED)
    print("plog: interrupted", file=sys.stderr)
    sys.exit(ExitCode.INTERRUPTED)


def one_line(e: BaseException) -> str:
    """An error as the one line after ``plog: error:`` (an I/O error as "what: file")."""
    if isinstance(e, OSError) and e.filename is not None:
        return f"{e.strerror or e}: {e.filename}"
    if isinstance(e, OSError) and e.strerror:
        # No file name: an I/O error on a standard stream (`plog dump ... > /dev/full`) or a
        # socket/pipe. Name stdout when it is the one that fails.
        return f"cannot write to standard output: {e.strerror}" if _stdout_failed(e) else e.strerror
    message = str(e)
    text = " ".join(message.split())
    path = getattr(e, "path", None)  # PlogError.path: the file the error is about, when known
    if isinstance(path, str) and path not in message:
        # "Found record size -1 smaller than ... (at byte 0)" alone does not say in which file.
        text = f"{path}: {text}"
    return text


def _stdout_failed(e: OSError) -> bool:
    """Whether ``e`` (an OSError without a file name) came from stdout: stdout cannot take
    what is still buffered for it, or ``e`` is "no space" and stdout is /dev/full or a file
    on a full file system. When it did, stdout is silenced, so the interpreter's final
    flush cannot print a second error."""
    import errno
    import stat

    try:
        sys.stdout.flush()
        failed = False
    except (OSError, ValueError):
        failed = True
    if not failed and e.errno in (errno.ENOSPC, errno.EDQUOT):
        try:
            st = os.fstat(sys.stdout.fileno())
            if stat.S_ISCHR(st.st_mode):
                failed = st.st_rdev == os.stat("/dev/full").st_rdev
            elif stat.S_ISREG(st.st_mode):
                vfs = os.fstatvfs(sys.stdout.fileno())
                failed = vfs.f_bavail == 0 or vfs.f_bfree == 0
        except (OSError, ValueError):
            pass
    if failed:
        _silence_stdout()
    return failed


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except OSError:
        pass  # no stdout to silence: the interpreter's last flush has nothing to fail on
