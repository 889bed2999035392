"""formats/crc.py: the native CRC-32C and the ``crc32c`` package's agree on every buffer
type and length (the check values of RFC 3720 included), and the native path never imports
the package (its ``importlib.metadata`` costs start-up)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import crc32c as reference
import pytest
from hypothesis import given, settings, strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

from native_twins import native_module  # noqa: E402,F401  (fixture)


@pytest.mark.parametrize("data, expected", [(b"", 0), (b"123456789", 0xE3069283), (bytes(32), 0x8A9136AA),
                                            (b"\xff" * 32, 0x62A8AB43)])
def test_check_values(native_module, data, expected):  # noqa: F811
    assert native_module.crc32c(data) == reference.crc32c(data) == expected


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=4096), st.integers(0, 64))
def test_every_buffer_type_agrees(native_module, data, cut):  # noqa: F811
    for buf in (data, bytearray(data), memoryview(data)[min(cut, len(data)):]):
        assert native_module.crc32c(buf) == reference.crc32c(buf)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048), st.binary(max_size=2048), st.integers(0, (1 << 32) - 1))
def test_continuing_a_checksum_agrees(native_module, head, tail, value):  # noqa: F811
    assert native_module.crc32c(tail, native_module.crc32c(head)) == reference.crc32c(head + tail)
    assert native_module.crc32c(tail, value) == reference.crc32c(tail, value)


def test_long_buffers_agree(native_module):  # noqa: F811
    data = os.urandom(3 << 20)  # over the GIL-release threshold
    assert native_module.crc32c(data) == reference.crc32c(data)
    assert native_module.crc32c(bytearray(data)) == reference.crc32c(data)


def test_non_contiguous_buffers_are_refused(native_module):  # noqa: F811
    with pytest.raises(ValueError):
        native_module.crc32c(memoryview(b"abcdef")[::2])


def test_the_native_path_does_not_import_the_package(native_module):  # noqa: F811
    code = ("import sys; import plog.formats.record_batch, plog.engine.storage.log; "
            "print('crc32c' in sys.modules, 'importlib.metadata' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k != "PLOG_NATIVE"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ["False", "False"]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**env, "PLOG_NATIVE": "0"}, check=True).stdout
    assert out.split()[0] == "True"  # the reference path uses the package
