"""Child program of ``test_kill_maintenance.py``: compaction, retention or recovery of a
log directory, to be killed with SIGKILL at any moment.

Two ways to run it:

``python maintainer.py run '<json params>'``
    Run one operation on ``params["dir"]`` and exit.
``python maintainer.py zygote``
    Import everything and run every operation once on a throwaway log directory (so no
    lazy import is left for the children), print ``R``, then read commands from stdin:
    ``run <json params>`` forks a child that does what ``run`` does; ``sync <token>`` reaps
    finished children and answers ``S <token>``; ``quit``.

Params: ``op`` (``compact``, ``retention`` or ``recover``), ``dir`` (a log directory),
``now_ms``, ``buffer_size``, ``delay`` (``file_delete_delay_ms``, None for the topic's),
``salvage``, ``all_segments``; ``trace`` (``none``, ``structural`` or ``all``);
``kill_step`` / ``kill_when`` (``before`` or ``after``): the child SIGKILLs itself at that
file-system step, before or after doing it.

**Steps.** In the child, every file-system mutation the engine makes through Python is a
numbered step: ``os.rename``/``os.replace`` (``rename``), ``os.unlink``/``os.remove``
(``unlink``), ``os.rmdir``, ``os.mkdir``, ``os.truncate``/``os.ftruncate`` (``truncate``),
``os.fsync``/``os.fdatasync`` (``fsync``), ``os.utime``, creating a file (``os.open`` with
``O_CREAT`` of a missing file or ``O_TRUNC``, ``open()`` for writing: ``create``), and
``os.write``/``os.pwrite`` (``write``). Writes through memory maps (index entries) are not
steps: the time-based kills cover them. Steps are numbered in the order made; for a given
input directory and params the sequence is deterministic, so the parent can measure it on
an uninterrupted run and pick a step to die at.

Every line goes to fd 1 with one ``os.write`` (atomic on a pipe):

* ``P <pid>``: started (before any step);
* ``F <n> <kind> <detail>``: step n is about to happen (``structural`` traces every step
  but writes, ``all`` every step);
* ``K <n> <when> <kind> <detail>``: dying at step n (``kill_step``), just before SIGKILL;
* ``D <elapsed ms> <steps>``: the operation returned;
* ``E <traceback>``: it raised (a bug: the parent fails the trial).
"""

from __future__ import annotations

import builtins
import io
import json
import os
import signal
import sys
import time
import traceback

from plog.engine.maintenance.runner import MaintenanceOptions, run_compaction, run_retention

_write = os.write  # the report channel never goes through the hooks
_readlink = os.readlink
_exists = os.path.exists


def say(line: str) -> None:
    _write(1, (line.replace("\n", " | ") + "\n").encode())


def recover(path: str, **kwargs):
    from plog.engine.maintenance.recovery import recover as engine_recover

    return engine_recover(path, **kwargs)


def run_operation(params: dict):
    op = params["op"]
    if op == "compact":
        options = MaintenanceOptions(now_ms=params["now_ms"], buffer_size=params["buffer_size"], force=True,
                                     file_delete_delay_ms=params.get("delay"))
        return run_compaction(params["dir"], options)
    if op == "retention":
        options = MaintenanceOptions(now_ms=params["now_ms"], file_delete_delay_ms=params.get("delay"))
        return run_retention(params["dir"], options)
    if op == "recover":
        # jobs=1: a pool of workers would outlive the SIGKILL of this process.
        return recover(params["dir"], all_segments=params.get("all_segments", False),
                       salvage=params.get("salvage", False), jobs=1)
    raise ValueError(f"unknown operation {op!r}")


# -- the step hooks ------------------------------------------------------------------------------


class Steps:
    """Counts (and maybe reports) file-system steps; dies at ``kill_step``."""

    def __init__(self, trace: str, kill_step: int | None, kill_when: str):
        self.n = 0
        self.trace = trace
        self.kill_step = kill_step
        self.kill_when = kill_when

    def before(self, kind: str, detail) -> int:
        self.n += 1
        n = self.n
        if self.trace == "all" or (self.trace == "structural" and kind != "write"):
            say(f"F {n} {kind} {detail()}")
        if n == self.kill_step and self.kill_when == "before":
            self.die(kind, detail)
        return n

    def after(self, n: int, kind: str, detail) -> None:
        if n == self.kill_step and self.kill_when == "after":
            self.die(kind, detail)

    def die(self, kind: str, detail) -> None:
        say(f"K {self.kill_step} {self.kill_when} {kind} {detail()}")
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # not reached: a process's SIGKILL to itself is delivered before kill() returns


def _name(path) -> str:
    if isinstance(path, int):
        return _fd_name(path)
    try:
        return os.path.basename(os.fsdecode(path))
    except TypeError:
        return repr(path)


def _fd_name(fd) -> str:
    if not isinstance(fd, int):
        try:
            fd = fd.fileno()
        except Exception:
            return repr(fd)
    try:
        return os.path.basename(_readlink(f"/proc/self/fd/{fd}")) or f"fd{fd}"
    except OSError:
        return f"fd{fd}"


def install_hooks(steps: Steps) -> None:
    """Wrap the ``os`` functions and ``open`` so that each mutation is a step."""

    def wrap(name: str, kind: str, detail_of, when=None):
        orig = getattr(os, name)

        def hooked(*args, **kwargs):
            if when is not None and not when(*args, **kwargs):
                return orig(*args, **kwargs)
            detail = lambda: detail_of(*args, **kwargs)  # noqa: E731 - built lazily, printed rarely
            n = steps.before(kind, detail)
            try:
                return orig(*args, **kwargs)
            finally:  # a call that fails (mkdir of an existing directory) is a step all the same
                steps.after(n, kind, detail)

        hooked.__name__ = name
        setattr(os, name, hooked)

    two = lambda src, dst, *a, **k: f"{_name(src)}>{_name(dst)}"  # noqa: E731
    one = lambda path, *a, **k: _name(path)  # noqa: E731
    wrap("rename", "rename", two)
    wrap("replace", "rename", two)
    wrap("unlink", "unlink", one)
    wrap("remove", "unlink", one)
    wrap("rmdir", "rmdir", one)
    wrap("mkdir", "mkdir", one)
    wrap("truncate", "truncate", lambda path, length: f"{_name(path)}@{length}")
    wrap("ftruncate", "truncate", lambda fd, length: f"{_fd_name(fd)}@{length}")
    wrap("fsync", "fsync", lambda fd: _fd_name(fd))
    wrap("fdatasync", "fsync", lambda fd: _fd_name(fd))
    wrap("utime", "utime", one)
    wrap("write", "write", lambda fd, data: f"{_fd_name(fd)}+{len(data)}", when=lambda fd, data: fd > 2)
    wrap("pwrite", "write", lambda fd, data, pos: f"{_fd_name(fd)}@{pos}+{len(data)}")

    def creates(path, flags, *a, **k) -> bool:
        if isinstance(path, int) or "dir_fd" in k:
            return bool(flags & os.O_TRUNC)
        return bool(flags & os.O_TRUNC) or bool(flags & os.O_CREAT) and not _exists(path)

    wrap("open", "create", one, when=creates)

    orig_open = builtins.open

    def open_hooked(file, mode="r", *args, **kwargs):
        if isinstance(file, int) or not any(c in mode for c in "wax+") or \
                ("w" not in mode and "x" not in mode and _exists(file)):
            return orig_open(file, mode, *args, **kwargs)
        n = steps.before("create", lambda: _name(file))
        try:
            return orig_open(file, mode, *args, **kwargs)
        finally:
            steps.after(n, "create", lambda: _name(file))

    builtins.open = open_hooked
    io.open = open_hooked


# -- the child -------------------------------------------------------------------------------------


def _child(params: dict) -> None:
    try:
        say(f"P {os.getpid()}")
        steps = Steps(params.get("trace", "none"), params.get("kill_step"), params.get("kill_when", "before"))
        install_hooks(steps)
        started = time.perf_counter()
        run_operation(params)
        say(f"D {(time.perf_counter() - started) * 1000:.3f} {steps.n}")
    except BaseException:
        say("E " + traceback.format_exc())
    finally:
        os._exit(0)


def warm_up() -> None:
    """Every operation once on a throwaway log directory (compacted and deleting topics,
    a transaction), so the forked children find every lazy import done."""
    import shutil
    import tempfile

    from plog.engine.storage.log_manager import LogManager
    from plog.formats.record_batch import encode_batch

    root = tempfile.mkdtemp(prefix="plog-maintainer-warmup-")
    try:
        now = int(time.time() * 1000)
        with LogManager([root], time_source=lambda: now) as lm:
            compact = lm.get_or_create_log(("warm", 0), config={"cleanup.policy": "compact", "segment.bytes": "2048"})
            delete = lm.get_or_create_log(("gone", 0), config={"segment.bytes": "2048", "retention.ms": "1000"})
            seq = {}
            for i in range(60):
                for pid, log in ((77, compact), (78, delete)):
                    recs = [(0, now - 10_000 + i, b"k%d" % (i % 7), None if i % 11 == 0 else b"v" * 40)]
                    codec = (0, 1, 2, 3, 4)[i % 5]
                    if i % 9 == 4:
                        seq[pid] = seq.get(pid, -1) + 1
                        log.append_as_leader(encode_batch(recs, producer_id=pid, producer_epoch=0,
                                                          base_sequence=seq[pid], is_transactional=True,
                                                          compression_codec=codec))
                        log.append_end_txn_marker(pid, 0, commit=i % 2 == 0)
                    else:
                        log.append_as_leader(encode_batch(recs, compression_codec=codec))
        run_compaction(root, MaintenanceOptions(now_ms=now, buffer_size=4096, force=True, file_delete_delay_ms=0))
        run_retention(root, MaintenanceOptions(now_ms=now))
        os.remove(os.path.join(root, ".kafka_cleanshutdown"))
        try:
            recover(root, jobs=1)
            recover(root, jobs=1, salvage=True, all_segments=True)
        except ImportError:
            pass  # plog.engine.maintenance.recovery not there yet: only the recover test needs it
    finally:
        shutil.rmtree(root, ignore_errors=True)


def zygote() -> None:
    warm_up()
    say("R")
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "run":
            params = json.loads(arg)
            if os.fork() == 0:
                _child(params)
        elif cmd == "sync":
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                pass
            say(f"S {arg}")
        elif cmd == "quit":
            return


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "zygote":
        zygote()
    elif len(sys.argv) == 3 and sys.argv[1] == "run":
        _child(json.loads(sys.argv[2]))
    else:
        sys.exit(f"usage: {sys.argv[0]} zygote | run JSON")
