"""Fetch released Apache Kafka jars from Maven Central into a cache outside the source tree.

    python tests/interop/kafka_fetch.py [VERSION ...]     # default: every version of the suite
    tests/interop/fetch_kafka.sh [VERSION ...]            # the same, from a shell

Layout: ``<cache root>/<version>/*.jar`` where the cache root is ``$PLOG_KAFKA_CACHE`` or
``<repo>/.kafka-cache`` (git-ignored). The jars are the runtime dependencies of
``tests/interop/pom.xml`` for ``-Dkafka.version=<version>``, copied by
``mvn dependency:copy-dependencies``; nothing is built and no Kafka source is copied.

A version folder is reused only when it holds the completion marker
(:data:`MARKER`). A fetch writes into a fresh ``.<version>.*.partial`` folder next to it,
writes the marker last, and renames the folder into place, so an interrupted download
is never taken for a complete one (the next fetch removes the leftover). Concurrent
fetches (two pytest processes) serialise on an ``flock`` of ``<cache root>/.fetch.lock``.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:  # run as a script
    sys.path.append(str(Path(__file__).resolve().parent))

from kafka_versions import VERSIONS, major  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
POM = HERE / "pom.xml"
MARKER = ".plog-fetch-complete"
FETCH_TIMEOUT_S = 1800


class FetchError(RuntimeError):
    """The jars could not be fetched; the message is one line."""


def cache_root() -> Path:
    env = os.environ.get("PLOG_KAFKA_CACHE")
    return Path(env).expanduser().resolve() if env else REPO / ".kafka-cache"


def cache_dir(version: str) -> Path:
    return cache_root() / version


def required_jars(version: str) -> list[str]:
    """Jars whose absence means the download is not usable."""
    jars = [f"kafka_2.13-{version}.jar", f"kafka-clients-{version}.jar", f"kafka-storage-{version}.jar"]
    if major(version) >= 4:
        jars.append(f"kafka-tools-{version}.jar")
    return jars


def is_complete(version: str) -> bool:
    d = cache_dir(version)
    return (d / MARKER).is_file() and all((d / j).is_file() for j in required_jars(version))


@contextmanager
def _locked(root: Path):
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".fetch.lock", "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _first_error(text: str) -> str:
    """Maven's first ``[ERROR]`` line (ANSI colours removed), else its last line."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln).strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    errors = [ln for ln in lines if ln.startswith("[ERROR]")]
    line = errors[0] if errors else (lines[-1] if lines else "(no output)")
    return line if len(line) <= 400 else line[:397] + "..."


def fetch(version: str, *, mvn: str | None = None, timeout: float = FETCH_TIMEOUT_S) -> Path:
    """The cache folder of ``version``, fetching it first if it is not complete.

    Raises :class:`FetchError` (one line) when ``mvn`` is missing or the download fails.
    """
    target = cache_dir(version)
    if is_complete(version):
        return target
    root = cache_root()
    with _locked(root):
        if is_complete(version):  # another process fetched it while we waited
            return target
        mvn = mvn or shutil.which("mvn")
        if not mvn:
            raise FetchError(f"Kafka {version} is not in {target} and `mvn` is not on PATH to fetch it")
        # Leftovers of interrupted fetches: we hold the lock, so nobody is writing them.
        for stale in root.glob(f".{version}.*.partial"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{version}.", suffix=".partial", dir=root))
        try:
            cmd = [mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(POM), f"-Dkafka.version={version}",
                   "dependency:copy-dependencies", f"-DoutputDirectory={tmp}", "-DincludeScope=runtime"]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp)
            except subprocess.TimeoutExpired:
                raise FetchError(f"fetching Kafka {version} with mvn took more than {timeout:.0f} s") from None
            if proc.returncode != 0:
                raise FetchError(f"`mvn dependency:copy-dependencies -Dkafka.version={version}` failed "
                                 f"(exit {proc.returncode}): {_first_error(proc.stdout + proc.stderr)}")
            missing = [j for j in required_jars(version) if not (tmp / j).is_file()]
            if missing:
                raise FetchError(f"the Kafka {version} download lacks {', '.join(missing)}")
            jars = sorted(p.name for p in tmp.glob("*.jar"))
            (tmp / MARKER).write_text(f"kafka.version={version}\n" + "".join(f"{j}\n" for j in jars))
            os.chmod(tmp, 0o755)  # mkdtemp makes it 0700
            if target.exists():  # an incomplete folder (no marker): replace it
                shutil.rmtree(target)
            os.rename(tmp, target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return target


def main(argv: list[str]) -> int:
    versions = argv or VERSIONS
    status = 0
    for v in versions:
        try:
            print(fetch(v))
        except FetchError as e:
            print(f"error: {e}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
