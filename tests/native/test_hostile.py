"""Hostile bytes through the native walker and decoders: random mutations of real segments
(every record file of the corpus) give exactly the reference's outcome, records or typed
error, never another exception or a crash. A few thousand here; tests/native/fuzz.py runs
the long campaign (100,000 and more). The seed is printed so a failure can be replayed
(PLOG_FUZZ_SEED).
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from native_twins import Campaign, native_module, record_files  # noqa: E402,F401

from conftest import CORPUS  # noqa: E402

SEED = int(os.environ.get("PLOG_FUZZ_SEED", random.randrange(1 << 30)))
MUTATIONS = 5000


def test_mutated_segments_agree_with_the_reference(native_module, corpus):
    print(f"PLOG_FUZZ_SEED={SEED}")
    campaign = Campaign(native_module, record_files(corpus), SEED)
    for _ in range(MUTATIONS):
        campaign.step()
    # The mutations reach the error paths (most of them), and not only those.
    assert MUTATIONS // 8 < campaign.errors < MUTATIONS
