"""The ``.lock`` of a log directory: refused across processes and within one, freed on SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from plog.engine.storage import lock as lock_mod
from plog.engine.errors import LogDirError, LogDirLockedError
from plog.engine.storage.lock import LOCK_FILE_NAME, LogDirLock


def _message(log_dir) -> str:
    return (f"Failed to acquire lock on file .lock in {os.path.realpath(log_dir)}. "
            "A Kafka instance in another process or thread is using this directory.")


# A child that takes the lock, says so, and waits to be killed.
HOLDER = textwrap.dedent("""
    import sys, time
    from plog.engine.storage.lock import LogDirLock
    lock = LogDirLock(sys.argv[1])
    print("locked", flush=True)
    time.sleep(120)
""")

# A child that tries once and reports what happened on one line.
TRIER = textwrap.dedent("""
    import sys
    from plog.engine.errors import LogDirLockedError
    from plog.engine.storage.lock import LogDirLock
    try:
        LogDirLock(sys.argv[1]).release()
    except LogDirLockedError as e:
        print(e)
        sys.exit(3)
    print("acquired")
""")

# What a JVM does in FileChannel.tryLock(): a POSIX record lock over the whole file.
JAVA_LIKE_HOLDER = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = os.open(os.path.join(sys.argv[1], ".lock"), os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 0, 0)
    print("locked", flush=True)
    time.sleep(120)
""")


def _spawn_holder(code: str, log_dir, cwd) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code, str(log_dir)], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if line != "locked":
        proc.kill()
        raise AssertionError(f"holder did not lock: {line!r} {proc.stderr.read()}")
    return proc


def _try_in_child(log_dir, cwd) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-c", TRIER, str(log_dir)], cwd=cwd,
                          capture_output=True, text=True, timeout=30)
    return done.returncode, done.stdout


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    proc.stderr.close()


def test_other_process_holds_then_sigkill_frees(tmp_path):
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    holder = _spawn_holder(HOLDER, log_dir, tmp_path)
    try:
        with pytest.raises(LogDirLockedError) as e:
            LogDirLock(log_dir)
        assert str(e.value) == _message(log_dir)
        assert "\n" not in str(e.value)
        assert lock_mod.held_log_dirs() == []
    finally:
        _kill(holder)
    # The kernel dropped the dead process's lock: no stale-lock cleanup is needed.
    with LogDirLock(log_dir) as lock:
        assert lock.locked
    assert not lock.locked


def test_second_process_is_refused_with_one_line(tmp_path):
    with LogDirLock(tmp_path):
        code, out = _try_in_child(tmp_path, tmp_path)
        assert code == 3
        assert out == _message(tmp_path) + "\n"
    code, out = _try_in_child(tmp_path, tmp_path)
    assert (code, out) == (0, "acquired\n")


def test_a_jvm_style_posix_lock_is_respected(tmp_path):
    holder = _spawn_holder(JAVA_LIKE_HOLDER, tmp_path, tmp_path)
    try:
        with pytest.raises(LogDirLockedError):
            LogDirLock(tmp_path)
    finally:
        _kill(holder)
    LogDirLock(tmp_path).release()


def test_same_process_second_lock_is_refused_and_first_survives(tmp_path):
    first = LogDirLock(tmp_path)
    try:
        with pytest.raises(LogDirLockedError) as e:
            LogDirLock(tmp_path)
        assert str(e.value) == _message(tmp_path)
        # Another spelling of the same directory is the same lock.
        (tmp_path / "alias").symlink_to(tmp_path)
        with pytest.raises(LogDirLockedError):
            LogDirLock(tmp_path / "alias")
        (tmp_path / "sub").mkdir()
        with pytest.raises(LogDirLockedError):
            LogDirLock(f"{tmp_path}/sub/..")
        # The refused attempts must not have closed a descriptor of .lock (that would drop
        # the process's POSIX lock): another process is still refused.
        code, _out = _try_in_child(tmp_path, tmp_path)
        assert code == 3
        assert first.locked
        assert lock_mod.held_log_dirs() == [os.path.realpath(tmp_path)]
    finally:
        first.release()
    assert lock_mod.held_log_dirs() == []
    LogDirLock(tmp_path).release()


def test_release_is_idempotent_and_keeps_the_file(tmp_path):
    lock = LogDirLock(tmp_path)
    assert (tmp_path / LOCK_FILE_NAME).is_file()
    assert (tmp_path / LOCK_FILE_NAME).stat().st_size == 0
    lock.release()
    lock.release()
    with lock:  # exiting a released lock is harmless too
        pass
    assert not lock.locked
    assert (tmp_path / LOCK_FILE_NAME).is_file()
    assert "locked=False" in repr(lock)


def test_existing_lock_file_is_reused(tmp_path):
    (tmp_path / LOCK_FILE_NAME).write_bytes(b"")
    with LogDirLock(tmp_path) as lock:
        assert lock.path == os.path.join(os.path.realpath(tmp_path), LOCK_FILE_NAME)


def test_independent_dirs_lock_independently(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    with LogDirLock(a), LogDirLock(b):
        assert lock_mod.held_log_dirs() == sorted([str(a), str(b)])


def test_missing_or_unusable_dir(tmp_path):
    with pytest.raises(LogDirError):
        LogDirLock(tmp_path / "missing")
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(LogDirError):
        LogDirLock(tmp_path / "file")
    assert lock_mod.held_log_dirs() == []


def test_forked_child_does_not_inherit_the_lock(tmp_path):
    lock = LogDirLock(tmp_path)
    try:
        pid = os.fork()
        if pid == 0:  # child: report through the exit code only
            code = 1
            try:
                if lock_mod.held_log_dirs() == [] and not lock.locked:
                    try:
                        LogDirLock(tmp_path)
                    except LogDirLockedError:
                        code = 0  # refused by the kernel: the parent still holds it
            finally:
                os._exit(code)
        _pid, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        # The child closed its inherited descriptor; the parent's lock must survive that.
        assert _try_in_child(tmp_path, tmp_path)[0] == 3
    finally:
        lock.release()
