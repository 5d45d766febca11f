#!/usr/bin/env python3
"""Write tests/durations.json, the test times a fresh machine orders the suite by (tests/conftest.py), from the
times this machine recorded ($CAPD_PY_CACHE/test-durations.json, written by every pytest run). Only tests of 2 s
or more, in whole seconds: the order needs no more, and the file changes only when a test's time does.
Run after a green `make test`:  .venv/bin/python hack/test-durations.py [OUT] (default tests/durations.json)"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIN_SECONDS = 2.0


def main(argv: list[str]) -> int:
    cache = Path(os.environ.get("CAPD_PY_CACHE") or Path.home() / ".cache" / "capd-py") / "test-durations.json"
    try:
        recorded = json.loads(cache.read_text())
    except (OSError, ValueError) as e:
        print(f"no recorded test times at {cache} ({e}): run `make test` first", file=sys.stderr)
        return 1
    # tests that no longer exist drop out: only node ids whose file is still there
    kept = {k: round(v) for k, v in sorted(recorded.items())
            if v >= MIN_SECONDS and (ROOT / k.split("::", 1)[0]).exists()}
    out = Path(argv[0]) if argv else ROOT / "tests" / "durations.json"
    out.write_text(json.dumps(kept, indent=0) + "\n")
    print(f"{out}: {len(kept)} tests of {MIN_SECONDS:g} s or more", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
