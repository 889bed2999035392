"""formats/native.py, the one loader: ``PLOG_NATIVE=0`` selects the reference path, a
missing build falls back to it, the formats modules bind one path at import, and
``plog --version`` says which one runs. Each case is a fresh interpreter (the choice is
made once per process).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from native_twins import native_module  # noqa: E402,F401

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from cli_run import plog_exe  # noqa: E402

PROBE = """
import sys
{prelude}
from plog.formats import native, default_record
from plog.formats.batches import BatchIterator
print(native.active())
print(native.describe())
print(BatchIterator.__iter__.__name__)
print(default_record.decode_records is default_record.reference_decode_records,
      default_record.record_heads is default_record.reference_record_heads)
"""


def _env(**changes) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PLOG_NATIVE"}
    env.update(changes)
    return env


def _probe(prelude: str = "", **env) -> list[str]:
    r = subprocess.run([sys.executable, "-c", PROBE.format(prelude=prelude)], capture_output=True, text=True,
                       env=_env(**env), timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_plog_native_0_selects_the_reference_path():
    assert _probe(PLOG_NATIVE="0") == ["False", "pure Python (PLOG_NATIVE=0)", "_iter_reference", "True True"]


def test_a_missing_build_falls_back_to_the_reference_path():
    # None in sys.modules makes the import fail as a missing module does.
    lines = _probe("sys.modules['plog._native'] = None")
    assert lines == ["False", "pure Python (native module not built)", "_iter_reference", "True True"]


def test_the_native_path_is_the_default_when_built(native_module):
    lines = _probe()
    assert lines == ["True", f"native (Rust, plog._native {native_module.__version__})", "_iter_native", "False False"]
    assert _probe(PLOG_NATIVE="1") == lines


@pytest.mark.parametrize("env, line", [
    ({"PLOG_NATIVE": "0"}, "implementation: pure Python (PLOG_NATIVE=0)"),
    ({}, "implementation: native (Rust, plog._native {version})"),
])
def test_plog_version_names_the_active_path(native_module, env, line):
    r = subprocess.run([plog_exe(), "--version"], capture_output=True, text=True, env=_env(**env), timeout=60)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.splitlines()[1] == line.format(version=native_module.__version__)


def test_a_panic_becomes_a_typed_error(native_module):
    """A panic in native code (a bug) reaches the user as plog's typed error, one line,
    not as a crash or pyo3's PanicException (a BaseException no handler expects)."""
    from plog.formats.errors import CorruptRecordError
    from plog.formats.native import typed_error

    with pytest.raises(native_module.NativeFormatError) as e:
        native_module._panic_guard_probe()
    err = typed_error(e.value)
    assert type(err) is CorruptRecordError and str(err) == "Native decoder failed (the guard's probe) (at byte 0)"


def test_wrong_arguments_are_python_errors(native_module):
    """Objects that are not byte buffers are refused with Python's own errors before any
    native code reads them."""
    with pytest.raises(TypeError):
        native_module.decode_records("not bytes", 1, 0, 0)
    with pytest.raises(TypeError):
        native_module.walk_entries(12345)
    with pytest.raises(ValueError):
        native_module.walk_entries(b"", -1)
    with pytest.raises(ValueError):  # file positions past int64
        native_module.walk_entries(bytes(100), 0, None, (1 << 63) - 10)
    with pytest.raises(ValueError):  # a strided view is not one run of bytes
        native_module.walk_entries(memoryview(bytes(100))[::2])
