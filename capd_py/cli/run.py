"""`capd-py controllers`: logging for a long-running process, then the operator (controllers/operator.py)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from pathlib import Path

from capd_py.controllers.context import Settings
from capd_py.controllers.operator import run
from capd_py.kube import leader


def leader_config(namespace: str | None, identity: str | None) -> leader.Config:
    """The Lease `capd-py-controllers` in the pod's namespace; the identity is unique per process (client-go's
    hostname_uuid), so a restarted container never mistakes its predecessor's lease for its own."""
    ns = namespace or os.environ.get("POD_NAMESPACE") or "capd-py-system"
    who = identity or os.environ.get("POD_NAME") or socket.gethostname()
    return leader.Config(namespace=ns, identity=f"{who}_{uuid.uuid4().hex[:12]}")


class ConfigError(Exception):
    """The controllers' settings from the environment are unusable (the message names the variable)."""


def check_settings() -> None:
    """Read the settings once before anything starts, so a bad CAPD_PY_* value is one clear line at start, not a
    traceback in the first reconcile."""
    try:
        Settings()
    except ValueError as e:
        raise ConfigError(str(e)) from e


def main(kubeconfig: str | None, verbose: bool = False, threads: int = 64,
         leader_election: leader.Config | None = None, webhook_bind: str | None = None) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kopf").setLevel(logging.INFO if verbose else logging.WARNING)
    # Workload API servers refuse connections while they boot; we poll and requeue, so urllib3's
    # per-retry warnings are noise.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    check_settings()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path and not Path(path).expanduser().exists():
        raise FileNotFoundError(f"kubeconfig {path} does not exist")
    asyncio.run(run(str(Path(path).expanduser()) if path else None, threads=threads,
                    leader_election=leader_election, webhook_bind=webhook_bind,
                    webhook_refresh_seconds=float(os.environ.get("CAPD_PY_WEBHOOK_REFRESH_SECONDS", "60"))))
