"""The CLI's one error boundary, and the frame of every run (Typer-free).

:func:`run` is what ``plog`` does around a command, however it was read (Typer's parse in
``cli/app.py``, or a plain run's in ``cli/plain.py``): SIGTERM stops it as Ctrl-C does, the
root options' environment is put back afterwards, ``plog --verbose`` says what it cost, and
:func:`guarded` turns what the command raised into one line on stderr and an exit code:
a typed error by its kind (:func:`exit_code_of`), Ctrl-C 130, SIGTERM 143, a reader of stdout
that went away 0, a bug one line (a traceback with ``--debug``). Click's own exceptions
(usage errors, ``typer.Exit``) are ``cli/app.py``'s to translate, inside this boundary.

No Typer, Click or engine import here: a plain run must not pay for them.
"""

from __future__ import annotations

import os
import sys
import time

from .exit_codes import KIND_EXIT_CODES, ExitCode

# What the root options set for the length of one run (the commands' options and worker
# processes read them); put back afterwards, so an embedding process (the tests call main()
# in-process) does not inherit `plog --quiet` from an earlier call.
RUN_ENV = ("PLOG_DEBUG", "PLOG_QUIET", "PLOG_VERBOSE", "NO_COLOR")


def run(argv: list[str], command) -> None:
    """Run ``command()`` (no arguments; it exits with ``sys.exit`` or returns for 0) as
    ``plog ARGV``, inside :func:`guarded`."""
    from .signals import handle_sigterm, restore

    saved = {k: os.environ.get(k) for k in RUN_ENV}
    started = time.monotonic()
    # SIGTERM stops the command as Ctrl-C does (cli/signals.py), for every command at once.
    previous_sigterm = handle_sigterm()
    try:
        guarded(command)
    finally:
        verbose_summary(argv, started)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        restore(previous_sigterm)


def guarded(command) -> None:
    """``command()``, with what it raises translated (see the module docstring)."""
    # The one root of every typed error (formats, engine, Spark, CLI): formats is the
    # lowest layer, so it defines it, and importing it costs nothing at start-up.
    from plog.formats.errors import PlogError

    try:
        command()
    except KeyboardInterrupt:
        interrupted()
    except BrokenPipeError:
        # `plog dump ... | head`: the reader went away; that is not an error.
        silence_stdout()
        sys.exit(ExitCode.OK)
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


def verbose_summary(argv: list[str], started: float) -> None:
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


def interrupted() -> None:
    """Ctrl-C: one line on stderr, exit 130; SIGTERM (the same clean stop, cli/signals.py):
    ``plog: terminated``, exit 143. Output already written stays (it is complete lines of
    data); a stdout that cannot take the rest is silenced so the interpreter's final flush
    cannot add a second message."""
    from .signals import terminated

    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        silence_stdout()
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
    from plog.formats.errors import PlogError

    if isinstance(e, PlogError):
        # What went wrong after it (engine code adds a note, e.g. a close that failed too).
        for note in getattr(e, "__notes__", ()):
            text += "; " + " ".join(str(note).split())
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
        silence_stdout()
    return failed


def silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except OSError:
        pass  # no stdout to silence: the interpreter's last flush has nothing to fail on
