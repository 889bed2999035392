"""Test harness, not product code: put on a child's PYTHONPATH (tests/cli/test_interrupt.py).

With ``INTERRUPT_TEST_STOP_AT`` set to a directory, the first process that opens a ``.log``
under it stops itself (SIGSTOP) right after the open: the test then knows the command is in
the middle of its work, however fast that work is, and queues its Ctrl-C or SIGTERM before
letting it go on. (Polling /proc for an open segment missed commands that read a whole data
directory in a few milliseconds.)

"The first process" is decided across the whole process group: a worker forked before any
segment was opened would otherwise stop itself at its own first segment, after the test had
already let the group go on, and stay stopped for ever. The process that creates the file
``INTERRUPT_TEST_STOP_FLAG`` (``O_EXCL``) is the one that stops."""

import builtins
import os
import signal

_root = os.environ.get("INTERRUPT_TEST_STOP_AT")
_flag = os.environ.get("INTERRUPT_TEST_STOP_FLAG")

if _root and _flag:
    _state = {"stopped": False}
    _real_open = builtins.open
    _real_os_open = os.open

    def _maybe_stop(path) -> None:
        try:
            name = os.fspath(path)
        except TypeError:
            return  # a descriptor
        if isinstance(name, bytes):
            name = os.fsdecode(name)
        if not _state["stopped"] and name.endswith(".log") and os.path.abspath(name).startswith(_root):
            _state["stopped"] = True
            try:
                os.close(_real_os_open(_flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            except FileExistsError:
                return  # another process of the command stopped first
            os.kill(os.getpid(), signal.SIGSTOP)

    def _open(file, *args, **kwargs):
        f = _real_open(file, *args, **kwargs)
        _maybe_stop(file)
        return f

    def _os_open(path, *args, **kwargs):
        fd = _real_os_open(path, *args, **kwargs)
        _maybe_stop(path)
        return fd

    builtins.open = _open
    os.open = _os_open
