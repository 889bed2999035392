"""A runnable Apicurio Registry for the ``--schema-registry URL`` interop test, built once from
its released artifacts on Maven Central into the git-ignored cache.

    python tests/interop/apicurio_fetch.py          # build (or find) it; prints the runner jar

Layout: ``<cache root>/apicurio-<version>/`` (the cache root of :mod:`kafka_fetch`:
``$PLOG_KAFKA_CACHE`` or ``<repo>/.kafka-cache``) holds Quarkus's ``*-runner.jar`` and its
``lib/``. ``apicurio/pom.xml`` says what is built and why. The app's ``application.properties``
is read from the app's own jar (fetched by ``mvn dependency:copy``), with the lines that index
that jar added. A build writes a fresh ``.apicurio-*.partial`` folder, the completion marker
last, and renames it into place (under the cache lock), as :mod:`kafka_fetch` does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:  # run as a script
    sys.path.append(str(Path(__file__).resolve().parent))

from kafka_fetch import FetchError, _first_error, _locked, cache_root  # noqa: E402

HERE = Path(__file__).resolve().parent
PROJECT = HERE / "apicurio"
VERSION = "2.4.2.Final"
MARKER = ".plog-fetch-complete"
BUILD_TIMEOUT_S = 1800
INDEX_LINES = """
# plog: the app jar carries no Jandex index; index it for CDI bean discovery.
quarkus.index-dependency.app.group-id=io.apicurio
quarkus.index-dependency.app.artifact-id=apicurio-registry-app
quarkus.index-dependency.common.group-id=io.apicurio
quarkus.index-dependency.common.artifact-id=apicurio-registry-common
"""


def cache_dir() -> Path:
    return cache_root() / f"apicurio-{VERSION}"


def runner_jar(folder: Path) -> Path | None:
    found = sorted(folder.glob("*-runner.jar"))
    return found[0] if found and (folder / MARKER).is_file() and (folder / "lib").is_dir() else None


def _mvn(mvn: str, args: list[str], cwd: Path, what: str) -> None:
    try:
        proc = subprocess.run([mvn, "-q", "-B", "-Dstyle.color=never", *args], capture_output=True, text=True,
                              timeout=BUILD_TIMEOUT_S, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise FetchError(f"{what} took more than {BUILD_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        raise FetchError(f"{what} failed (exit {proc.returncode}): {_first_error(proc.stdout + proc.stderr)}")


def fetch(*, mvn: str | None = None) -> Path:
    """The runner jar, building it first if the cache has none. :class:`FetchError` (one line)
    when ``mvn`` is missing or the build fails."""
    target = cache_dir()
    jar = runner_jar(target)
    if jar is not None:
        return jar
    root = cache_root()
    with _locked(root):
        jar = runner_jar(target)
        if jar is not None:
            return jar
        mvn = mvn or shutil.which("mvn")
        if not mvn:
            raise FetchError(f"Apicurio Registry is not in {target} and `mvn` is not on PATH to build it")
        for stale in root.glob(".apicurio-*.partial"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=".apicurio-", suffix=".partial", dir=root))
        try:
            build = tmp / "build"
            shutil.copytree(PROJECT, build)
            _mvn(mvn, ["dependency:copy", f"-Dartifact=io.apicurio:apicurio-registry-app:{VERSION}",
                       f"-DoutputDirectory={tmp}"], tmp, f"fetching apicurio-registry-app {VERSION}")
            with zipfile.ZipFile(tmp / f"apicurio-registry-app-{VERSION}.jar") as z:
                properties = z.read("application.properties").decode("utf-8")
            resources = build / "src" / "main" / "resources"
            resources.mkdir(parents=True, exist_ok=True)
            (resources / "application.properties").write_text(properties + INDEX_LINES)
            _mvn(mvn, ["-DskipTests", "package"], build, f"building Apicurio Registry {VERSION} (tests/interop/apicurio)")
            out = tmp / "dist"
            out.mkdir()
            (runner,) = (build / "target").glob("*-runner.jar")
            shutil.copy2(runner, out / runner.name)
            shutil.copytree(build / "target" / "lib", out / "lib")
            (out / MARKER).write_text(f"apicurio.version={VERSION}\n")
            os.chmod(out, 0o755)
            if target.exists():
                shutil.rmtree(target)
            os.rename(out, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    jar = runner_jar(target)
    if jar is None:
        raise FetchError(f"the Apicurio Registry build left no runner jar in {target}")
    return jar


if __name__ == "__main__":
    try:
        print(fetch())
    except FetchError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
