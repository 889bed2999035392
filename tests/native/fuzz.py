"""The long hostile campaign: random mutations of real segments through the native walker
and decoders, each compared with the reference (tests/native/test_hostile.py runs a few
thousand of the same in the suite).

    .venv/bin/python tests/native/fuzz.py --mutations 100000 [--seed N] [--corpus DIR]

Prints one JSON object: how many mutations ran, how many ended in a typed error (the rest
decoded identically), the time, the peak RSS. On the first disagreement (or any exception
that is not plog's typed error) it writes the input (its repr) to a file, prints the seed
and the step, and exits 1. Exit 0: exact agreement throughout.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from native_twins import Campaign, load_native, record_files  # noqa: E402

from plog.formats import native  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutations", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--corpus", type=Path,
                        default=Path(os.environ.get("PLOG_CORPUS", HERE.parent.parent.parent / "shared" / "corpus")))
    args = parser.parse_args(argv)
    module, why = load_native()
    if module is None:
        print(f"fuzz.py: the native module plog._native does not import ({why})", file=sys.stderr)
        return 2
    native.module, native.NativeFormatError = module, module.NativeFormatError
    files = record_files(args.corpus)
    if not files:
        print(f"fuzz.py: no record files under {args.corpus}", file=sys.stderr)
        return 2
    seed = random.randrange(1 << 30) if args.seed is None else args.seed
    campaign = Campaign(module, files, seed)
    started = time.perf_counter()
    step = 0
    try:
        for step in range(1, args.mutations + 1):
            campaign.step()
    except Exception:  # noqa: BLE001 - any disagreement or untyped error ends the campaign
        traceback.print_exc()
        fd, path = tempfile.mkstemp(prefix=f"plog-fuzz-{seed}-{step}-", suffix=".txt")
        with os.fdopen(fd, "w") as out:
            out.write(repr(campaign.last) + "\n")
        print(f"fuzz.py: disagreement at step {step} (seed {seed}); its input is in {path}", file=sys.stderr)
        return 1
    print(json.dumps({
        "native": native.describe(),
        "seed": seed,
        "mutations": campaign.mutations,
        "typed_errors": campaign.errors,
        "identical_decodes": campaign.mutations - campaign.errors,
        "disagreements": 0,
        "seconds": round(time.perf_counter() - started, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "corpus_files": len(files),
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
