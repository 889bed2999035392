"""The README's two set-up commands exist, and .ci/run runs the test one verbatim."""

from __future__ import annotations

import re

from conftest import ROOT


def _commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section, flags=re.S)


def test_exactly_two_commands():
    cmds = _commands()
    assert len(cmds) == 2
    run, test = cmds
    assert "pip install" in run and "plog " in run
    assert "pip install" in test and "pytest" in test


def test_ci_runs_the_readme_test_command():
    test = _commands()[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert test in ci
    assert "PLOG_REQUIRE_KAFKA=1" in ci and "set -euo pipefail" in ci
