"""What the suite itself tells the person running it, as run (over xdist workers, by
pyproject's addopts): the interop header line, and why the interop suite was skipped when
Java is missing, in the one-line summary tests/interop/conftest.py's skips promise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_skipped_interop_suite_says_why_in_a_whole_suite_run(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PLOG_REQUIRE_KAFKA"}
    env["PATH"] = str(tmp_path)  # no java here (the child is started by its full path)
    # No paths on the command line: as `python -m pytest`, the worker processes alone
    # collect tests/interop; the summary must still reach the controller's terminal.
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
                        "-k", "test_verify_kafka_dirs"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "plog interop: Kafka 4.3.1" in r.stdout and "PLOG_REQUIRE_KAFKA=unset" in r.stdout
    assert "plog interop suite skipped: `java` is not on PATH (the interop suite runs Apache Kafka)" in r.stdout
    assert " skipped" in r.stdout.splitlines()[-1] and "passed" not in r.stdout.splitlines()[-1]
