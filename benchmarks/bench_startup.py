"""Start-up: how long ``plog`` takes before it does anything (issue 10: ``plog --help`` and
``plog dump`` of a small file "well under half a second").

Figures, each the median of ``--reps`` runs of the installed ``plog`` script as a child
process, in wall seconds and in CPU seconds (user + system of the child; steadier on a
shared machine):

* ``help``: ``plog --help``;
* ``dump_small``: ``plog dump --print-data-log`` of a small real segment from the corpus
  (one batch), output to /dev/null;
* ``completion_values``: ``plog completions values topic`` (what a TAB press runs);
* ``python_bare``: ``python -c pass`` with the same interpreter, the floor;
* peer ``kafka_dump_log``: Kafka's DumpLogSegments on the same segment (a JVM start), when
  the Kafka jars are in the interop cache (``.kafka-cache/<version>/lib``); otherwise null.

Prints one JSON object (see workloads.emit).
Usage: python benchmarks/bench_startup.py [--reps 7] [--json FILE]
"""

from __future__ import annotations

import argparse
import glob
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workloads import emit  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"help_s": 0.5, "dump_small_s": 0.5}
SEGMENT = ("../shared/corpus/suryavansh__food-ordering-service/kafka/data/"
           "__confluent.support.metrics-0/00000000000000000000.log")


# As on a user's machine, the children may write .pyc files (a wheel install compiles them at
# install time; an editable one on first use). A PYTHONDONTWRITEBYTECODE inherited from a CI
# or sandbox shell would make every run recompile each module edited since the last cache.
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _run(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one child run; the child's output is discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=_ENV)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _median(argv: list[str], reps: int) -> dict:
    _run(argv)  # warm the page cache and .pyc files
    runs = [_run(argv) for _ in range(reps)]
    return {"wall_s": round(statistics.median(r[0] for r in runs), 3),
            "cpu_s": round(statistics.median(r[1] for r in runs), 3)}


def _kafka_classpath() -> str | None:
    # tests/interop fetches each Kafka release's jars into .kafka-cache/<version>/.
    dirs = sorted((d for d in glob.glob(str(ROOT / ".kafka-cache" / "*")) if glob.glob(os.path.join(d, "kafka_*.jar"))),
                  key=lambda d: [int(x) for x in os.path.basename(d).split(".") if x.isdigit()], reverse=True)
    return os.path.join(dirs[0], "*") if dirs else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json")
    args = ap.parse_args()

    plog = str(Path(sys.executable).parent / "plog")
    segment = str((ROOT / SEGMENT).resolve())
    figures = {
        "help": _median([plog, "--help"], args.reps),
        "dump_small": _median([plog, "dump", "--print-data-log", segment], args.reps),
        "completion_values": _median([plog, "completions", "values", "topic", "-d", str(ROOT)], args.reps),
        "python_bare": _median([sys.executable, "-c", "pass"], args.reps),
    }
    cp = _kafka_classpath()
    peer = None
    if cp:
        peer = _median(["java", "-cp", cp, "org.apache.kafka.tools.DumpLogSegments", "--print-data-log",
                        "--files", segment], max(3, args.reps // 2))
    result = {
        "benchmark": "startup",
        "reps": args.reps,
        "figures": figures,
        "peer": {"kafka_dump_log": peer, "classpath": cp},
        "targets": TARGETS,
        "targets_met": {"help": figures["help"]["wall_s"] < TARGETS["help_s"],
                        "dump_small": figures["dump_small"]["wall_s"] < TARGETS["dump_small_s"]},
        "load_average": os.getloadavg()[0],
    }
    emit(result, args.json)


if __name__ == "__main__":
    main()
