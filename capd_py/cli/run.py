"""`capd-py controllers`: logging for a long-running process, then the operator (controllers/operator.py)."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from capd_py.controllers.operator import run


def main(kubeconfig: str | None, verbose: bool = False, threads: int = 64) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kopf").setLevel(logging.INFO if verbose else logging.WARNING)
    # Workload API servers refuse connections while they boot; we poll and requeue, so urllib3's
    # per-retry warnings are noise.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path and not Path(path).expanduser().exists():
        raise FileNotFoundError(f"kubeconfig {path} does not exist")
    asyncio.run(run(str(Path(path).expanduser()) if path else None, threads=threads))
