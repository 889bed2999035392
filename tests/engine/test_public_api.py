"""plog.engine's front door: every exported name resolves to the object its module defines,
and importing the package loads none of them (the command line stays quick to start)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import plog.engine as engine


@pytest.mark.parametrize("name", engine.__all__)
def test_every_exported_name_is_the_one_its_module_defines(name):
    module = importlib.import_module(engine._EXPORTS[name])
    assert getattr(engine, name) is getattr(module, name)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        engine.Nope  # noqa: B018


def test_importing_the_package_loads_no_engine_module():
    code = ("import sys, plog.engine; "
            "print(sorted(m for m in sys.modules if m.startswith('plog.engine.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_readme_api_section_starts_from_plog_engine():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "from plog.engine import DataDir, Producer, Consumer" in readme
    assert "from plog.engine import LogManager" in readme
