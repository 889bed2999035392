"""``plog simulate SCENARIO.yaml``: scripted replication runs on the real engine, as a timeline."""

from __future__ import annotations

import shutil
import sys
import tempfile
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from .errors import PlogCliError
from .exit_codes import Outcome
from .output import ReportFormat, emit_document, status
from .app import app


class Truncation(str, Enum):
    leader_epoch = "leader-epoch"
    high_watermark = "high-watermark"


EPILOG = (
    "Example: plog simulate examples/scenarios/leader-epoch-loss.yaml --truncation high-watermark\n\n"
    "A scenario (YAML or JSON) names the brokers, the truncation mode, broker configs, topics and "
    "steps:\n\n"
    "\b\n"
    "  name: story (a)\n"
    "  brokers: 2\n"
    "  truncation: leader-epoch        # or high-watermark (Kafka before KIP-101)\n"
    "  broker_configs: {replica.lag.time.max.ms: 30000, broker.session.timeout.ms: 9000}\n"
    "  topics: [{name: t, replicas: [[1, 2]], configs: {min.insync.replicas: 1}}]\n"
    "  steps:\n"
    "    - produce: {topic: t, values: [m0], acks: 1}  # count: N, keys, expect_error\n"
    "    - replicate: {}                    # followers catch up (topic, partition, broker)\n"
    "    - fetch: {broker: 2}               # one fetch request per follower replica\n"
    "    - pause: 2                         # and resume: 2\n"
    "    - stop: 1                          # controlled shutdown; crash: 1\n"
    "    - start: {broker: 2, catch_up: false}\n"
    "    - advance: 31s                     # virtual time: the controller and fetchers act\n"
    "    - elect-preferred: {}\n"
    "    - consume: {topic: t, as: seen}\n"
    "    - note: free text\n"
    "    - expect: {leader: {t-0: 2}, isr: {t-0: [1, 2]}, leader_epoch: {t-0: 1},\n"
    "               hw: {t-0: 2}, leo: {t-0@1: 2}, values: {t-0: [m0, m1]},\n"
    "               replicas_identical: [t-0], acked_lost: {t-0: []}, consumed: {seen: [m0]}}\n\n"
    "Each step prints '[t=TIME] step N: STEP', the controller's events, what the fetchers did, "
    "and per partition each replica's log end offset, high watermark, latest leader epoch and ISR "
    "membership (* marks the leader). The run uses a new data directory (a temporary one, removed "
    "after unless --keep); its files are real Kafka partitions. More scenarios: examples/scenarios.\n\n"
    "Exit status: 0 every expectation held, 1 an engine error ended the run, 2 usage error "
    "(a bad scenario file), 3 expectations failed."
)


@app.command("simulate", epilog=EPILOG)
def simulate(
    scenario: str = typer.Argument(..., help="Scenario file (YAML or JSON; - for stdin)."),
    data_dir: Optional[str] = typer.Option(None, "--data-dir", "-d",
                                           help="Run in this new (missing or empty) directory and keep it. "
                                                "Default: a temporary directory."),
    keep: bool = typer.Option(False, "--keep", help="Keep the temporary data directory (its path goes to stderr)."),
    truncation: Optional[Truncation] = typer.Option(None, "--truncation",
                                                    help="Override the scenario's truncation mode, to compare."),
    fmt: ReportFormat = typer.Option(ReportFormat.text, "--format", "-f", case_sensitive=False,
                                     help="text: the timeline; json: the whole report as one document; "
                                          "jsonl: the same on one line."),
) -> Outcome:
    """Run a replication scenario (produce, fetch, crash, start, elections, expectations) and
    print the timeline of log end offsets and high watermarks per replica."""
    from plog.engine.cluster.scenario import load_scenario
    from plog.engine.errors import ScenarioError
    from plog.engine.cluster.simulation import run_scenario

    if scenario == "-":
        sc = load_scenario(sys.stdin.read())
    else:
        path = Path(scenario)
        if path.is_dir() or not path.exists():
            raise ScenarioError(f"scenario {scenario}: {'is a directory' if path.is_dir() else 'no such file'}")
        try:
            sc = load_scenario(path)  # a file, or a pipe such as the shell's <(...) and /dev/stdin
        except ScenarioError as e:
            if scenario in str(e):
                raise
            # The loader's messages name the step and key, not the file.
            raise ScenarioError(f"{e} (scenario file {scenario})") from None

    if data_dir is not None:
        target = Path(data_dir)
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise typer.BadParameter(f"{data_dir} exists and is not an empty directory", param_hint="--data-dir")
        temporary = False
    else:
        target = Path(tempfile.mkdtemp(prefix="plog-simulate-"))
        temporary = True

    on_step = None
    if fmt is ReportFormat.text:
        print(_header(sc, truncation.value if truncation else sc.truncation))
        on_step = _print_step
    try:
        report = run_scenario(sc, target, on_step, truncation=truncation.value if truncation else None)
    finally:
        if temporary and not keep:
            shutil.rmtree(target, ignore_errors=True)
    if temporary and keep:
        status(f"data directory kept at {target}")
    elif temporary:
        report.data_dir = None  # removed

    if fmt is not ReportFormat.text:
        emit_document(report.to_json(), fmt)
    else:
        for line in _trailer(report):
            print(line)
    sys.stdout.flush()
    if report.error is not None:
        raise PlogCliError(report.error)
    if report.failures:
        n = len(report.failures)
        print(f"{n} expectation{'s' if n != 1 else ''} failed", file=sys.stderr)
        return Outcome.PROBLEMS_FOUND
    status(f"{len(report.steps)} steps, every expectation held")
    return Outcome.OK


# -- the timeline --------------------------------------------------------------------------------


def _header(sc, truncation: str) -> str:
    name = f"{sc.name}: " if sc.name else ""
    return f"# {name}{len(sc.brokers)} broker(s) {', '.join(map(str, sc.brokers))}, truncation {truncation}"


def format_time(ms: int) -> str:
    return f"{ms / 1000:.1f}s" if ms % 100 == 0 else f"{ms / 1000:.3f}s"


def _replica_cell(r) -> str:
    state = []
    if r.state != "running":
        state.append(r.state + (", fenced" if r.fenced else ""))
    elif r.paused:
        state.append("paused")
    tag = f" ({'; '.join(state)})" if state else ""
    epoch = "-" if r.leader_epoch is None else r.leader_epoch
    leo = "?" if r.log_end_offset is None else r.log_end_offset
    hw = "?" if r.high_watermark is None else r.high_watermark
    return (f"broker {r.broker}{'*' if r.leader else ''}{tag}: LEO {leo} HW {hw} epoch {epoch} "
            f"{'ISR' if r.in_isr else 'out-of-ISR'}")


def format_step(result) -> list[str]:
    """The timeline block of one step."""
    lines = [f"[t={format_time(result.time_ms)}] step {result.index}: {result.text}"]
    lines += [f"  {e.describe()}" for e in result.events]
    lines += [f"  {d}" for d in result.details]
    width = max((len(str(p.tp)) for p in result.partitions), default=0)
    for p in result.partitions:
        cells = " | ".join(_replica_cell(r) for r in p.replicas)
        offline = "  (offline)" if p.leader < 0 else ""
        lines.append(f"  {str(p.tp):<{width}}  {cells}{offline}")
    lines += [f"  FAILED: {f}" for f in result.failures]
    if result.error is not None:
        lines.append(f"  ERROR: {result.error}")
    return lines


def _print_step(result) -> None:
    print("\n".join(format_step(result)))
    sys.stdout.flush()


def _trailer(report) -> list[str]:
    from plog.engine.cluster.scenario import yaml_flow

    lines = []
    for tp, lost in report.acked_lost.items():
        if lost is None:
            lines.append(f"acknowledged records of {tp}: unknown (no leader at the end)")
        elif lost:
            lines.append(f"acknowledged but missing below the high watermark of {tp}: {yaml_flow(lost)}")
    return lines
