"""Upstream clusterctl for tests: the binary `make clusterctl` builds, and a local provider repository.

clusterctl finds provider releases in repositories (GitHub by default). A local repository is a directory
`{base}/{manifest label}/{version}/` holding the components YAML and a `metadata.yaml` (release series ->
contract); a `clusterctl.yaml` whose `providers:` name it with a `file://` URL replaces clusterctl's default
for that provider. `local_repository` writes capd-py's own repository (`capd-py clusterctl repository`,
kube/components.py: the real components of its four providers, at the version capd-py records in the inventory,
so `clusterctl upgrade plan` runs offline) plus any extra provider (e.g. a third-party infrastructure provider for
`clusterctl init --infrastructure NAME`).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capd_py.api.versions import CLUSTER_API_VERSION
from capd_py.kube.components import write_provider, write_repository
from capd_py.reconcile import inventory
from capd_py.reconcile.components import COMPONENTS_FILE
from capd_py.testing.envtest import cache_dir


def binary(version: str = CLUSTER_API_VERSION) -> Path:
    return cache_dir() / "clusterctl" / version / "clusterctl"


def missing(version: str = CLUSTER_API_VERSION) -> str | None:
    """Why the clusterctl binary cannot be used (None: it can)."""
    b = binary(version)
    if not (b.is_file() and os.access(b, os.X_OK)):
        return f"upstream clusterctl {version} not found at {b}; build it with `make clusterctl`"
    return None


@dataclass(frozen=True)
class ExtraProvider:
    name: str                # clusterctl provider name, e.g. "minimal"
    type: str                # inventory.INFRASTRUCTURE, ...
    version: str             # e.g. v0.1.0
    components: str          # the components YAML (may use clusterctl variables)
    contract: str = "v1beta2"

    @property
    def manifest_label(self) -> str:
        return inventory.ProviderRecord(self.name, self.type, "").manifest_label


def local_repository(base: Path, extra: tuple[ExtraProvider, ...] = (),
                     version: str = CLUSTER_API_VERSION) -> Path:
    """Write the repository under `base`; returns the clusterctl.yaml naming it (pass it as `--config`)."""
    entries = []
    for e in extra:
        path = write_provider(base.resolve(), e.manifest_label, e.version, COMPONENTS_FILE[e.type], e.components,
                              e.contract)
        entries.append({"name": e.name, "type": e.type, "url": path.as_uri()})
    return write_repository(base, version, extra=entries)


def run(args: list[str], config: Path | None, home: Path, timeout: float = 180,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    """clusterctl with its own config directory under `home` (it writes ~/.config/cluster-api), no GitHub
    version check, no colours. `check`: a non-zero exit raises AssertionError with the output."""
    env = {**os.environ, "CLUSTERCTL_DISABLE_VERSIONCHECK": "true", "XDG_CONFIG_HOME": str(home / "xdg"),
           "HOME": str(home), "NO_COLOR": "1"}
    cmd = [str(binary()), *args, *(["--config", str(config)] if config else [])]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def cert_manager_api_crds() -> list[dict[str, Any]]:
    """The two kinds of cert-manager's API that `clusterctl init` probes before it installs anything (it creates
    an Issuer and a Certificate in namespace cert-manager-test and deletes them; when that fails it downloads
    cert-manager from GitHub and waits for the same probe: upstream cmd/clusterctl/client/cluster/cert_manager.go).
    A test double for an installed cert-manager on an envtest API server, which runs no controllers at all:
    nothing issues these Certificates, and capd-py needs none (its webhooks carry their own CA)."""
    def crd(kind: str, plural: str) -> dict[str, Any]:
        return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{plural}.cert-manager.io"},
                "spec": {"group": "cert-manager.io", "scope": "Namespaced",
                         "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                                   "singular": kind.lower()},
                         "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                             "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    return [crd("Issuer", "issuers"), crd("Certificate", "certificates")]
