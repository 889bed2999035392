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


def _tour_script() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## A five-minute tour", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.+?)\n```", section, flags=re.S)
    assert len(blocks) == 1, "the tour is one sh block"
    return blocks[0]


def test_the_tour_runs_as_written(tmp_path):
    """The README's five-minute tour, verbatim, with the installed plog: every step exits 0
    (bash -e), and what it promises holds: recovery leaves nothing for verify to report, the
    cleaner leaves one record per key in the cleaned section."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("PLOG_")}
    env["PATH"] = f"{os.path.dirname(sys.executable)}{os.pathsep}{env.get('PATH', '')}"
    script = _tour_script()
    proc = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    out = proc.stdout
    assert "baseOffset: 0 lastOffset:" in out  # Kafka's DumpLogSegments text
    assert "billing  orders" in out
    assert "cleaned in 1 round(s)" in out
    assert "0 errors, 0 warnings" in proc.stderr  # verify after recover
    # The last three lines: one value per key, the newest of the cleaned rounds or later.
    tail = out.strip().splitlines()[-3:]
    assert [line.split("=")[0] for line in tail] == ["user-0", "user-1", "user-10"]
