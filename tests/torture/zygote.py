"""The parent's side of a torture zygote: one process that imports plog once and forks a
fresh child per trial (see ``maintainer.py``), and the SIGKILL plumbing around a child.

The zygote speaks a line protocol on stdin/stdout: it prints ``R`` when ready, forks a
child for ``run <json>``, and answers ``sync <token>`` with ``S <token>`` after reaping
its finished children. Children print their own lines to the same stdout, so a sync
collects everything a dead child printed. A child's pid is never reused before the next
sync (the zygote has not reaped it), so a pidfd opened on it is safe to signal.
"""

from __future__ import annotations

import os
import queue
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path


class ZygoteError(AssertionError):
    """The zygote or a child did not behave (no line in time, exited)."""


class Zygote:
    """A ``<script> zygote`` process; its stdout lines arrive in a queue."""

    def __init__(self, script: str | os.PathLike, *, start_timeout: float = 120.0, line_timeout: float = 30.0):
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.script = Path(script)
        self.line_timeout = line_timeout
        self.proc = subprocess.Popen([sys.executable, str(self.script), "zygote"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, bufsize=0)
        self.lines: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._token = 0
        ready = self.get(start_timeout)
        if ready != "R":
            self.close()
            raise ZygoteError(f"the zygote {self.script.name} did not start: {ready!r}")

    def _read(self) -> None:
        for raw in self.proc.stdout:
            self.lines.put(raw.decode(errors="replace").rstrip("\n"))
        self.lines.put(None)

    def send(self, line: str) -> None:
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def get(self, timeout: float | None = None) -> str:
        timeout = self.line_timeout if timeout is None else timeout
        try:
            line = self.lines.get(timeout=max(0.0, timeout))
        except queue.Empty:
            raise ZygoteError(f"no line from {self.script.name} within {timeout:.3f} s") from None
        if line is None:
            self.lines.put(None)  # every later get sees the end too
            raise ZygoteError(f"the zygote {self.script.name} exited (rc={self.proc.poll()})")
        return line

    def sync(self) -> list[str]:
        """Every line printed before now that was not read yet (the child must be dead)."""
        self._token += 1
        self.send(f"sync {self._token}")
        token = f"S {self._token}"
        out = []
        while True:
            line = self.get()
            if line == token:
                return out
            out.append(line)

    def close(self) -> None:
        try:
            self.send("quit")
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait()


def wait_dead(pidfd: int, timeout: float) -> bool:
    """True once the process behind ``pidfd`` has exited (or been killed)."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(int(timeout * 1000)))


def sigkill(pidfd: int) -> None:
    """SIGKILL the process behind ``pidfd``; a process that already exited is fine."""
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass
