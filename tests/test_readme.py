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


#: The tour's compaction step, replayed: 5 rounds of ``seq 1 400`` as key ``user-(i % 20)`` and
#: value ``v<round>-<i>``, 400 records a round (offsets 0-1999).
TOUR_ROUNDS, TOUR_ROUND_RECORDS, TOUR_KEYS = 5, 400, 20


def _latest(rounds: range) -> dict[str, str]:
    """Each key's last value produced in ``rounds``, in produce order."""
    last = {}
    for r in rounds:
        for i in range(1, TOUR_ROUND_RECORDS + 1):
            last[f"user-{i % TOUR_KEYS}"] = f"v{r}-{i}"
    return last


def _key_values(text: str) -> list[tuple[str, str]]:
    return [tuple(line.split("=", 1)) for line in text.splitlines()]


def test_the_tour_runs_as_written(tmp_path):
    """The README's five-minute tour, verbatim, with the installed plog: every step exits 0
    (bash -e), and what it promises holds: recovery leaves nothing for verify to report; the
    cleaner leaves one record per key, its last, in the rounds it may clean (1-4), and leaves
    round 5 in the active segment as written; reading from the start, each key's last consumed
    value is its latest produced one, as the printed lines show."""
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

    cleaned, latest = _latest(range(1, TOUR_ROUNDS)), _latest(range(1, TOUR_ROUNDS + 1))
    assert set(cleaned.values()) != set(latest.values())  # round 5 rewrote every key
    shown = ["user-0", "user-1", "user-10"]
    tail = _key_values("\n".join(out.strip().splitlines()[-6:]))
    assert tail == [(k, cleaned[k]) for k in shown] + [(k, latest[k]) for k in shown]

    # What the printed lines sample, for every key, read back from the tour's data directory.
    def consume(*args) -> list[tuple[str, str]]:
        r = subprocess.run(["plog", "consume", "users", "-e", "-q", "--format", "%k=%v\n", *args],
                           cwd=tmp_path, env=dict(env, PLOG_DATA_DIR=str(tmp_path / "tour-data")),
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return _key_values(r.stdout)

    rounds_1_to_4 = consume("--offset", f"0:{(TOUR_ROUNDS - 1) * TOUR_ROUND_RECORDS}")
    assert sorted(rounds_1_to_4) == sorted(cleaned.items())  # one record per key: its last
    everything = consume()
    assert everything[-TOUR_ROUND_RECORDS:] == [  # round 5, untouched in the active segment
        (f"user-{i % TOUR_KEYS}", f"v{TOUR_ROUNDS}-{i}") for i in range(1, TOUR_ROUND_RECORDS + 1)]
    assert dict(everything) == latest  # for each key, the last value consumed is the latest produced
